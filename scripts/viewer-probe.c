/* Watches a window on an X screen for the frame numbers a test stream carries as a barcode (scripts/bench-viewer.py
 * draws them), and prints when each one was first seen: "INDEX CLOCK_MONOTONIC_NS" per line. This is what a
 * photodiode on a real monitor would tell, read back through the X server instead: the moment the window's pixels
 * show the frame. Polls every 0.5 ms, so a time is at most that (plus one XGetImage, ~0.1 ms here) late.
 *
 * The barcode: BITS blocks across the top of the picture, each BLOCK/WIDTH of its width and ROW/HEIGHT of its
 * height, most significant bit first, white for 1; a second row below holds the bits inverted (a window caught
 * half redrawn shows rows that disagree, and is not read). The window may show the picture scaled: positions are
 * taken as fractions of the window's size, which must have the picture's aspect (each viewer opens its window at
 * the picture's size).
 *
 *   cc -O2 -o viewer-probe viewer-probe.c -lX11
 *   DISPLAY=:N ./viewer-probe WINDOW_ID SECONDS
 */
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { BITS = 16, BLOCK = 32, ROW = 32, WIDTH = 640, HEIGHT = 360 };

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

static int brightness(XImage *image, int x, int y) {
    unsigned long pixel = XGetPixel(image, x, y);
    return (int)((pixel >> 16) & 0xff) + (int)((pixel >> 8) & 0xff) + (int)(pixel & 0xff);
}

/* The number shown, or -1 when the rows disagree or nothing is readable. */
static long read_barcode(XImage *image, int width, int height) {
    long value = 0;
    for (int bit = 0; bit < BITS; bit++) {
        int x = (int)((bit * BLOCK + BLOCK / 2) * (double)width / WIDTH);
        int top_y = (int)((ROW / 2) * (double)height / HEIGHT);
        int bottom_y = (int)((ROW + ROW / 2) * (double)height / HEIGHT);
        int top = brightness(image, x, top_y), bottom = brightness(image, x, bottom_y);
        if ((top > 384) == (bottom > 384) || abs(top - bottom) < 300) return -1;
        value = value << 1 | (top > 384);
    }
    return value;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: viewer-probe WINDOW_ID SECONDS\n");
        return 2;
    }
    Display *display = XOpenDisplay(NULL);
    if (!display) {
        fprintf(stderr, "viewer-probe: cannot open the display\n");
        return 1;
    }
    Window window = (Window)strtoul(argv[1], NULL, 0);
    uint64_t end = now_ns() + (uint64_t)(atof(argv[2]) * 1e9);
    long last = -1;
    while (now_ns() < end) {
        XWindowAttributes attributes;
        if (!XGetWindowAttributes(display, window, &attributes)) break;
        int width = attributes.width, height = attributes.height;
        int strip = (int)((2 * ROW) * (double)height / HEIGHT) + 1;
        if (strip > height) strip = height;
        XImage *image = XGetImage(display, window, 0, 0, (unsigned)width, (unsigned)strip, AllPlanes, ZPixmap);
        uint64_t seen = now_ns();
        if (image) {
            long value = read_barcode(image, width, height);
            XDestroyImage(image);
            if (value >= 0 && value != last) {
                printf("%ld %llu\n", value, (unsigned long long)seen);
                fflush(stdout);
                last = value;
            }
        }
        usleep(500);
    }
    XCloseDisplay(display);
    return 0;
}
