/* A clock on an X screen, for glass-to-glass measurements (scripts/real-screen-share.py --clock): a window without
 * decorations at X,Y showing CLOCK_REALTIME as a barcode, redrawn every millisecond. Whoever sees the screen later
 * (a frame in streamrecvd's ring, a frame a receiving browser displays) reads the time it was drawn and subtracts it
 * from the time it saw it.
 *
 * The barcode: BITS blocks of BLOCK x ROW pixels, most significant bit first, white for 1; the value is the time in
 * units of 100 microseconds modulo 2^BITS (28 minutes: a latency is the difference modulo that). A second row
 * holds the bits inverted: a capture that caught the window half redrawn shows rows that disagree, and is skipped.
 *
 *   cc -O2 -o screen-clock screen-clock.c -lX11
 *   DISPLAY=:N ./screen-clock X Y
 */
#include <X11/Xlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BITS = 24, BLOCK = 24, ROW = 40 };

static uint32_t now_units(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t units = (uint64_t)now.tv_sec * 10000u + (uint64_t)now.tv_nsec / 100000u;
    return (uint32_t)(units & ((1u << BITS) - 1));
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: screen-clock X Y\n");
        return 2;
    }
    Display *display = XOpenDisplay(NULL);
    if (display == NULL) {
        fprintf(stderr, "screen-clock: cannot open the display\n");
        return 1;
    }
    int screen = DefaultScreen(display);
    XSetWindowAttributes attributes = {.override_redirect = True, .background_pixel = BlackPixel(display, screen)};
    Window window = XCreateWindow(display, RootWindow(display, screen), atoi(argv[1]), atoi(argv[2]), BITS * BLOCK, 2 * ROW,
                                  0, CopyFromParent, InputOutput, CopyFromParent, CWOverrideRedirect | CWBackPixel, &attributes);
    XMapRaised(display, window);
    GC black = XCreateGC(display, window, 0, NULL), white = XCreateGC(display, window, 0, NULL);
    XSetForeground(display, black, BlackPixel(display, screen));
    XSetForeground(display, white, WhitePixel(display, screen));
    uint32_t shown = UINT32_MAX;
    for (;;) {
        uint32_t value = now_units();
        if (value != shown) {
            for (int bit = 0; bit < BITS; bit++) {
                int one = (value >> (BITS - 1 - bit)) & 1;
                XFillRectangle(display, window, one ? white : black, bit * BLOCK, 0, BLOCK, ROW);
                XFillRectangle(display, window, one ? black : white, bit * BLOCK, ROW, BLOCK, ROW);
            }
            XSync(display, False);
            shown = value;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}
