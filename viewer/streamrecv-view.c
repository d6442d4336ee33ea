/* streamrecv-view: a window showing the newest frame of a stream's ring (`streamrecvctl view NAME` runs it).
 *
 * SDL2 makes the window and the OpenGL context on X11 or Wayland; each frame is copied out of its slot once (under
 * the seqlock, on the source's thread), uploaded once into textures and turned into RGB by a shader
 * (view-render.c), then presented at the display's refresh. A frame published while the window is busy replaces the
 * one waiting: the window always shows the newest frame, never a queue. Keys: f or F11 fullscreen, o overlay,
 * q or Escape quit. */
#define _GNU_SOURCE
#include "view-overlay.h"
#include "view-render.h"
#include "view-source.h"

#include <SDL.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static Uint32 wake_event;
static atomic_int wake_pending;

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

/* view_source's notify: one wake event waiting at a time. */
static void wake(void *context) {
    (void)context;
    if (atomic_exchange(&wake_pending, 1)) return;
    SDL_Event event = { .type = wake_event };
    SDL_PushEvent(&event);
}

static int usage(const char *problem) {
    if (problem) fprintf(stderr, "streamrecv-view: %s\n", problem);
    fputs("usage: streamrecv-view [--shm SHMNAME] [--fullscreen] [--overlay] [--no-vsync] [--title TEXT]\n"
          "                       [--frame-log FILE] STREAM\n"
          "  shows the newest frame of /dev/shm/streamrecv-STREAM (or /dev/shm/SHMNAME)\n", stderr);
    return 2;
}

struct options {
    char path[256];
    const char *title;
    const char *frame_log;
    int fullscreen, overlay, vsync;
};

static int parse(int argc, char **argv, struct options *options) {
    options->vsync = 1;
    const char *stream = NULL, *shm = NULL;
    for (int i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        if (!strcmp(argv[i], "--fullscreen")) options->fullscreen = 1;
        else if (!strcmp(argv[i], "--overlay")) options->overlay = 1;
        else if (!strcmp(argv[i], "--no-vsync")) options->vsync = 0;
        else if (!strcmp(argv[i], "--title") && has_value) options->title = argv[++i];
        else if (!strcmp(argv[i], "--frame-log") && has_value) options->frame_log = argv[++i];
        else if (!strcmp(argv[i], "--shm") && has_value) shm = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(NULL);
        else if (argv[i][0] == '-') return usage("unknown option, or an option without its value");
        else if (stream) return usage("one stream at a time");
        else stream = argv[i];
    }
    if (!stream && !shm) return usage("which stream?");
    if (shm && shm[0] == '/') shm++;
    if ((stream && !ring_name_valid(stream)) || (shm && !ring_name_valid(shm)))
        return usage("a stream or shm name is letters, digits, '-', '_' and '.', not starting with '.'");
    if (shm) snprintf(options->path, sizeof options->path, "/dev/shm/%s", shm);
    else snprintf(options->path, sizeof options->path, "/dev/shm/streamrecv-%s", stream);
    return 0;
}

struct viewer {
    SDL_Window *window;
    struct view_renderer *renderer;
    struct view_overlay *overlay;
    struct view_source source;
    struct view_picture picture;
    int have_picture, overlay_on, user_sized, unsupported_said;
    int requested_width, requested_height; /* the size this program gave the window last */
    int largest_texture;                    /* GL_MAX_TEXTURE_SIZE */
    uint64_t shown_frames, last_sequence;
    uint32_t pixel_format;
    FILE *frame_log;
    struct streamrecv_shm_slot logged_slot; /* the frame taken last, for the frame log */
    uint64_t logged_taken_ns;
};

/* The window takes each new picture size (within the display), until the user sizes it or goes fullscreen. */
static void size_window(struct viewer *viewer) {
    if (viewer->user_sized || (SDL_GetWindowFlags(viewer->window) & SDL_WINDOW_FULLSCREEN)) return;
    SDL_Rect usable;
    int display = SDL_GetWindowDisplayIndex(viewer->window);
    /* The turned picture's bounding box, at its height in pixels (a quarter turn makes a wide picture tall). */
    double c = fabs(cos(viewer->picture.rotation)), s = fabs(sin(viewer->picture.rotation));
    double h = viewer->picture.shown_height, w = viewer->picture.aspect * h;
    int width = (int)lround(w * c + h * s), height = (int)lround(w * s + h * c);
    if (display >= 0 && SDL_GetDisplayUsableBounds(display, &usable) == 0 && usable.w > 0 && usable.h > 0) {
        double scale = SDL_min(1.0, SDL_min((double)usable.w / width, (double)usable.h / height));
        width = (int)(width * scale), height = (int)(height * scale);
    }
    if (width == viewer->requested_width && height == viewer->requested_height) return;
    viewer->requested_width = width;
    viewer->requested_height = height;
    SDL_SetWindowSize(viewer->window, width, height);
}

/* Takes the newest frame, if one came: 1 when there is something new to draw. */
static int take(struct viewer *viewer) {
    const struct view_frame *frame = view_source_take(&viewer->source);
    if (!frame) return 0;
    struct view_picture picture;
    /* Larger than the GPU's textures: GL would refuse it and leave the window black. */
    int drawable = view_picture_from_slot(&frame->slot, &picture) == 0;
    int too_large = drawable && (picture.texels_wide[0] > (uint32_t)viewer->largest_texture ||
                                 picture.texels_high[0] > (uint32_t)viewer->largest_texture);
    if (!drawable || too_large) {
        if (!viewer->unsupported_said++)
            fprintf(stderr, "streamrecv-view: frames of pixel format %u (%ux%u) cannot be shown%s\n", frame->slot.pixel_format,
                    frame->slot.width, frame->slot.height, too_large ? ": larger than the GPU's textures" : "");
        return 0;
    }
    viewer->unsupported_said = 0;
    view_renderer_upload(viewer->renderer, &picture, &frame->slot, frame->data);
    int other_size = !viewer->have_picture || picture.shown_width != viewer->picture.shown_width ||
                     picture.shown_height != viewer->picture.shown_height || picture.aspect != viewer->picture.aspect ||
                     picture.rotation != viewer->picture.rotation;
    if (other_size || frame->slot.pixel_format != viewer->pixel_format)
        fprintf(stderr, "streamrecv-view: showing %ux%u %s (%s, %s range)\n", picture.shown_width, picture.shown_height,
                view_pixel_format_name(frame->slot.pixel_format), picture.matrix_name, picture.full_range ? "full" : "limited");
    viewer->picture = picture;
    viewer->pixel_format = frame->slot.pixel_format;
    viewer->have_picture = 1;
    viewer->last_sequence = frame->slot.sequence;
    if (other_size) size_window(viewer);
    viewer->shown_frames++;
    viewer->logged_slot = frame->slot;
    viewer->logged_taken_ns = frame->taken_ns;
    view_overlay_frame(viewer->overlay, &frame->slot, &picture, now_ns());
    return 1;
}

static void present(struct viewer *viewer, int logged) {
    int width, height;
    SDL_GL_GetDrawableSize(viewer->window, &width, &height);
    char status[160];
    uint64_t lapped;
    uint32_t state;
    view_source_read_status(&viewer->source, status, sizeof status, &lapped, &state);
    /* Without a frame the status is always shown: the window says what it waits for. */
    if (viewer->overlay_on || !viewer->have_picture) {
        const void *pixels;
        int w, h, pitch;
        if (view_overlay_render(viewer->overlay, status, lapped, !viewer->overlay_on, now_ns(), &pixels, &w, &h, &pitch) == 0)
            view_renderer_set_overlay(viewer->renderer, pixels, w, h, pitch);
    } else {
        view_renderer_set_overlay(viewer->renderer, NULL, 0, 0, 0);
        view_overlay_forget(viewer->overlay);
    }
    view_renderer_draw(viewer->renderer, width, height);
    SDL_GL_SwapWindow(viewer->window);
    /* A line per frame shown: sequence, published, copied out, swapped (CLOCK_MONOTONIC ns), drawn size. */
    if (logged && viewer->frame_log) {
        fprintf(viewer->frame_log, "%llu %llu %llu %llu %dx%d\n", (unsigned long long)viewer->logged_slot.sequence,
                (unsigned long long)viewer->logged_slot.time_published_ns, (unsigned long long)viewer->logged_taken_ns,
                (unsigned long long)now_ns(), width, height);
        fflush(viewer->frame_log);
    }
}

static int open_window(struct viewer *viewer, const struct options *options) {
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_PROFILE_MASK, SDL_GL_CONTEXT_PROFILE_CORE);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MAJOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MINOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_DOUBLEBUFFER, 1);
    char title[sizeof options->path + 16];
    const char *base = strrchr(options->path, '/');
    if (options->title) snprintf(title, sizeof title, "%s", options->title);
    else snprintf(title, sizeof title, "streamrecv %s", base && !strncmp(base + 1, "streamrecv-", 11) ? base + 12 : options->path);
    viewer->window = SDL_CreateWindow(title, SDL_WINDOWPOS_UNDEFINED, SDL_WINDOWPOS_UNDEFINED, 640, 360,
        SDL_WINDOW_OPENGL | SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI |
        (options->fullscreen ? SDL_WINDOW_FULLSCREEN_DESKTOP : 0));
    viewer->requested_width = 640, viewer->requested_height = 360;
    if (!viewer->window || !SDL_GL_CreateContext(viewer->window)) {
        fprintf(stderr, "streamrecv-view: cannot open an OpenGL 3.3 window: %s\n", SDL_GetError());
        return -1;
    }
    /* At the display's refresh: adaptive where the driver has it, otherwise plain vsync. */
    if (options->vsync && SDL_GL_SetSwapInterval(-1) != 0) SDL_GL_SetSwapInterval(1);
    if (!options->vsync) SDL_GL_SetSwapInterval(0);
    char error[600];
    viewer->largest_texture = view_renderer_largest_texture();
    viewer->renderer = view_renderer_create(error, sizeof error);
    if (!viewer->renderer) {
        fprintf(stderr, "streamrecv-view: %s\n", error);
        return -1;
    }
    return 0;
}

static void toggle_fullscreen(struct viewer *viewer) {
    int full = (SDL_GetWindowFlags(viewer->window) & SDL_WINDOW_FULLSCREEN) != 0;
    SDL_SetWindowFullscreen(viewer->window, full ? 0 : SDL_WINDOW_FULLSCREEN_DESKTOP);
}

int main(int argc, char **argv) {
    struct options options = { 0 };
    int parsed = parse(argc, argv, &options);
    if (parsed != 0) return parsed;
    struct viewer viewer = { .overlay_on = options.overlay };
    if (options.frame_log && !(viewer.frame_log = fopen(options.frame_log, "w"))) {
        fprintf(stderr, "streamrecv-view: cannot write %s: %s\n", options.frame_log, strerror(errno));
        return 1;
    }
    if (SDL_Init(SDL_INIT_VIDEO) != 0) {
        fprintf(stderr, "streamrecv-view: cannot reach a display (X11 or Wayland): %s\n", SDL_GetError());
        return 1;
    }
    /* Without a display SDL falls back to drivers that show nothing (offscreen, dummy): a window nobody can see
     * is an error, unless the user named the driver. */
    const char *driver = SDL_GetCurrentVideoDriver();
    if (!getenv("SDL_VIDEODRIVER") && driver && (!strcmp(driver, "offscreen") || !strcmp(driver, "dummy"))) {
        fprintf(stderr, "streamrecv-view: cannot reach a display (X11 or Wayland): no DISPLAY or WAYLAND_DISPLAY to "
                        "show a window on (SDL would use its %s driver)\n", driver);
        SDL_Quit();
        return 1;
    }
    wake_event = SDL_RegisterEvents(1);
    if (open_window(&viewer, &options) != 0 || !(viewer.overlay = view_overlay_create())) {
        SDL_Quit();
        return 1;
    }
    if (view_source_start(&viewer.source, options.path, wake, NULL) != 0) {
        fprintf(stderr, "streamrecv-view: cannot start a thread\n");
        return 1;
    }
    int running = 1, redraw = 1;
    uint64_t next_overlay_ns = 0;
    while (running) {
        SDL_Event event;
        int logged = 0;
        /* Woken by a frame, the user, or twice a second to keep the overlay's figures current. */
        if (SDL_WaitEventTimeout(&event, 500)) {
            do {
                if (event.type == wake_event) {
                    atomic_store(&wake_pending, 0);
                    if (take(&viewer)) redraw = logged = 1;
                    else redraw = 1; /* a status changed */
                } else if (event.type == SDL_QUIT) {
                    running = 0;
                } else if (event.type == SDL_KEYDOWN) {
                    SDL_Keycode key = event.key.keysym.sym;
                    if (key == SDLK_q || key == SDLK_ESCAPE) running = 0;
                    else if (key == SDLK_f || key == SDLK_F11) toggle_fullscreen(&viewer);
                    else if (key == SDLK_o || key == SDLK_TAB) viewer.overlay_on = !viewer.overlay_on, redraw = 1;
                } else if (event.type == SDL_MOUSEBUTTONDOWN && event.button.clicks == 2) {
                    toggle_fullscreen(&viewer);
                } else if (event.type == SDL_WINDOWEVENT) {
                    /* A size this program did not ask for: the user's (or the window manager's) to keep. */
                    if (event.window.event == SDL_WINDOWEVENT_RESIZED &&
                        (event.window.data1 != viewer.requested_width || event.window.data2 != viewer.requested_height))
                        viewer.user_sized = 1;
                    redraw = 1;
                }
            } while (running && SDL_PollEvent(&event));
        }
        uint64_t now = now_ns();
        if ((viewer.overlay_on || !viewer.have_picture) && now >= next_overlay_ns) redraw = 1, next_overlay_ns = now + 500000000ULL;
        if (running && redraw) {
            present(&viewer, logged);
            redraw = 0;
        }
    }
    view_source_stop(&viewer.source);
    fprintf(stderr, "streamrecv-view: showed %llu frames\n", (unsigned long long)viewer.shown_frames);
    view_renderer_destroy(viewer.renderer);
    view_overlay_destroy(viewer.overlay);
    if (viewer.frame_log) fclose(viewer.frame_log);
    SDL_Quit();
    return 0;
}
