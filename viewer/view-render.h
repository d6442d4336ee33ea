/* Drawing with OpenGL 3.3 core (through the context SDL made): a frame's planes uploaded once into textures, turned
 * into RGB by a shader with the slot's own matrix and range, fitted to the window; and an overlay of text. */
#ifndef STREAMRECV_VIEW_RENDER_H
#define STREAMRECV_VIEW_RENDER_H

#include "view-picture.h"

#include <stdint.h>

struct view_renderer;

/* NULL (with `error` filled) when the context lacks what the shaders need. */
struct view_renderer *view_renderer_create(char *error, size_t error_size);
void view_renderer_destroy(struct view_renderer *renderer);

/* GL_MAX_TEXTURE_SIZE of the current context. */
int view_renderer_largest_texture(void);

/* Uploads a frame: `data` is the slot's pixel data (plane offsets and strides as the slot says). */
void view_renderer_upload(struct view_renderer *renderer, const struct view_picture *picture,
                          const struct streamrecv_shm_slot *slot, const uint8_t *data);

/* The overlay's pixels (RGBA, `width` × `height`, rows of `pitch` bytes), or none (NULL). */
void view_renderer_set_overlay(struct view_renderer *renderer, const void *rgba, int width, int height, int pitch);

/* Clears the window and draws the last frame uploaded (if any), then the overlay. */
void view_renderer_draw(struct view_renderer *renderer, int window_width, int window_height);

#endif
