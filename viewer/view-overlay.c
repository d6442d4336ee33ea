/* See view-overlay.h. */
#include "view-overlay.h"

#include <SDL.h>
#include <SDL_ttf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT_PATH "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"

struct view_overlay {
    TTF_Font *font;
    SDL_Surface *surface;
    /* Frames taken in the current second, and the rate of the last whole one. */
    uint64_t window_start_ns;
    unsigned window_frames;
    double rate;
    uint64_t frames;
    struct streamrecv_shm_slot slot;
    struct view_picture picture;
    uint64_t age_ns; /* published → taken, of the last frame */
    uint64_t first_byte_age_ns; /* its first byte received → taken */
    /* What `surface` shows, and when it was made: the text is made again at most 10 times a second. */
    char shown_text[768];
    int shown_status_only;
    uint64_t shown_ns;
};

/* The figures change with every frame, and text that changes 60 times a second cannot be read: ten times a second
 * can. (Rendering it is cheap, 0.065 ms of SDL_ttf a time measured here: legibility is the reason, not speed.) */
#define REFRESH_NS 100000000ULL

struct view_overlay *view_overlay_create(void) {
    struct view_overlay *overlay = calloc(1, sizeof *overlay);
    if (!overlay) return NULL;
    if (TTF_Init() != 0 || !(overlay->font = TTF_OpenFont(FONT_PATH, 15)))
        fprintf(stderr, "streamrecv-view: no overlay (%s: %s)\n", FONT_PATH, TTF_GetError());
    return overlay;
}

void view_overlay_destroy(struct view_overlay *overlay) {
    if (!overlay) return;
    if (overlay->surface) SDL_FreeSurface(overlay->surface);
    if (overlay->font) TTF_CloseFont(overlay->font);
    TTF_Quit();
    free(overlay);
}

void view_overlay_frame(struct view_overlay *overlay, const struct streamrecv_shm_slot *slot,
                        const struct view_picture *picture, uint64_t now_ns) {
    overlay->slot = *slot;
    overlay->picture = *picture;
    overlay->frames++;
    overlay->age_ns = now_ns > slot->time_published_ns ? now_ns - slot->time_published_ns : 0;
    overlay->first_byte_age_ns = slot->time_first_byte_ns && now_ns > slot->time_first_byte_ns
                                     ? now_ns - slot->time_first_byte_ns : 0;
    if (now_ns - overlay->window_start_ns >= 1000000000ULL) {
        if (overlay->window_start_ns)
            overlay->rate = overlay->window_frames * 1e9 / (double)(now_ns - overlay->window_start_ns);
        overlay->window_start_ns = now_ns;
        overlay->window_frames = 0;
    }
    overlay->window_frames++;
}

int view_overlay_render(struct view_overlay *overlay, const char *status, uint64_t lapped, int status_only,
                        uint64_t now_ns, const void **pixels, int *width, int *height, int *pitch) {
    if (!overlay->font) return -1;
    /* No frame for 2 s: the rate is 0, not the last second's that had frames. */
    double rate = now_ns - overlay->window_start_ns > 2000000000ULL ? 0 : overlay->rate;
    char text[768];
    const struct streamrecv_shm_slot *slot = &overlay->slot;
    if (status_only || overlay->frames == 0) {
        snprintf(text, sizeof text, "%s", status[0] ? status : "waiting for the first frame");
    } else {
        uint32_t flags = slot->flags;
        snprintf(text, sizeof text,
                 "%.1f fps   frame %llu   %ux%u %s\n%s, %s range\nage: %.2f ms since readable, %.1f ms since its first byte\n"
                 "flags:%s%s%s%s   lapped %llu%s%s",
                 rate, (unsigned long long)slot->sequence, overlay->picture.shown_width, overlay->picture.shown_height,
                 view_pixel_format_name(slot->pixel_format), overlay->picture.matrix_name,
                 overlay->picture.full_range ? "full" : "limited", overlay->age_ns / 1e6, overlay->first_byte_age_ns / 1e6,
                 flags & STREAMRECV_FRAME_KEYFRAME ? " keyframe" : "", flags & STREAMRECV_FRAME_CORRUPT ? " CORRUPT" : "",
                 flags & STREAMRECV_FRAME_DISCONTINUITY ? " discontinuity" : "",
                 flags & (STREAMRECV_FRAME_KEYFRAME | STREAMRECV_FRAME_CORRUPT | STREAMRECV_FRAME_DISCONTINUITY) ? "" : " none",
                 (unsigned long long)lapped, status[0] ? "\n" : "", status);
    }
    if (overlay->surface && status_only == overlay->shown_status_only &&
        (!strcmp(text, overlay->shown_text) || (!status_only && now_ns - overlay->shown_ns < REFRESH_NS)))
        return 1;
    SDL_Color white = { 255, 255, 255, 255 };
    SDL_Surface *rendered = TTF_RenderUTF8_Blended_Wrapped(overlay->font, text, white, 0);
    if (!rendered) return -1;
    SDL_Surface *converted = SDL_ConvertSurfaceFormat(rendered, SDL_PIXELFORMAT_ABGR8888, 0); /* bytes R, G, B, A */
    SDL_FreeSurface(rendered);
    if (!converted) return -1;
    if (overlay->surface) SDL_FreeSurface(overlay->surface);
    overlay->surface = converted;
    snprintf(overlay->shown_text, sizeof overlay->shown_text, "%s", text);
    overlay->shown_status_only = status_only;
    overlay->shown_ns = now_ns;
    *pixels = converted->pixels;
    *width = converted->w;
    *height = converted->h;
    *pitch = converted->pitch;
    return 0;
}

void view_overlay_forget(struct view_overlay *overlay) {
    if (overlay->surface) SDL_FreeSurface(overlay->surface);
    overlay->surface = NULL;
}
