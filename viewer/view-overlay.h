/* The overlay: a few lines of text over the picture (frames per second, size and format, how old the frame was
 * when it was taken, its flags, frames lapped), or the status alone while there is no frame. Text through
 * SDL_ttf in DejaVu Sans Mono. */
#ifndef STREAMRECV_VIEW_OVERLAY_H
#define STREAMRECV_VIEW_OVERLAY_H

#include "view-picture.h"

#include <stdint.h>

struct view_overlay;

/* Never NULL unless out of memory; without the font the overlay draws nothing (said once). */
struct view_overlay *view_overlay_create(void);
void view_overlay_destroy(struct view_overlay *overlay);

/* A frame was taken at `now_ns`. */
void view_overlay_frame(struct view_overlay *overlay, const struct streamrecv_shm_slot *slot,
                        const struct view_picture *picture, uint64_t now_ns);

/* Renders the text: RGBA pixels, valid until the next call. `status_only`: the status line alone (or a line saying
 * the viewer waits). 0: new pixels; 1: the last ones still stand (the same text, or figures made less than 0.1 s
 * ago); -1 when there is nothing to draw. */
int view_overlay_render(struct view_overlay *overlay, const char *status, uint64_t lapped, int status_only,
                        uint64_t now_ns, const void **pixels, int *width, int *height, int *pitch);

/* The overlay was taken off the screen: the next render makes new pixels. */
void view_overlay_forget(struct view_overlay *overlay);

#endif
