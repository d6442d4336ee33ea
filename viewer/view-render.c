/* See view-render.h. GL entry points come from libglvnd's libGL, which dispatches to whichever context is current
 * (GLX on X11, EGL on Wayland). */
#define GL_GLEXT_PROTOTYPES 1
#include "view-render.h"

#include <GL/gl.h>
#include <GL/glext.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct view_renderer {
    GLuint picture_program, overlay_program, vertex_array;
    GLuint planes[VIEW_MAX_PLANES];
    GLuint overlay;
    int overlay_width, overlay_height;
    struct view_picture picture;
    int have_picture;
    GLint u_half_size, u_turn, u_box_half, u_crop, u_flip, u_layout, u_scale, u_offset, u_matrix;
    GLint u_overlay_rect;
};

/* Four corners of a triangle strip, from gl_VertexID: no vertex buffer to fill. */
static const char *picture_vertex =
    "#version 330 core\n"
    "uniform vec2 half_size;\n" /* the picture's half extents: aspect / 2, 1 / 2 */
    "uniform mat2 turn;\n"      /* anticlockwise rotation */
    "uniform vec2 box_half;\n"  /* the turned picture's bounding box, half extents (the viewport) */
    "uniform vec4 crop;\n"      /* the visible rectangle, in texture coordinates */
    "uniform vec2 flip;\n"      /* 1, or -1 to mirror */
    "out vec2 coordinate;\n"
    "void main() {\n"
    "    vec2 corner = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1));\n"
    "    vec2 mirrored = mix(corner, 1.0 - corner, step(flip, vec2(0.0)));\n"
    "    coordinate = crop.xy + mirrored * crop.zw;\n"
    "    vec2 position = vec2(corner.x - 0.5, 0.5 - corner.y) * 2.0 * half_size;\n"
    "    gl_Position = vec4(turn * position / box_half, 0.0, 1.0);\n"
    "}\n";

static const char *picture_fragment =
    "#version 330 core\n"
    "in vec2 coordinate;\n"
    "out vec4 colour;\n"
    "uniform sampler2D plane0, plane1, plane2;\n"
    "uniform int arrangement;\n" /* enum view_layout */
    "uniform float scale;\n"
    "uniform vec3 offset;\n"
    "uniform mat3 matrix;\n"
    "void main() {\n"
    "    vec3 samples;\n"
    "    if (arrangement == 1) samples = vec3(texture(plane0, coordinate).r, texture(plane1, coordinate).rg);\n"
    "    else if (arrangement == 2) samples = vec3(texture(plane0, coordinate).r, 0.0, 0.0);\n"
    "    else samples = vec3(texture(plane0, coordinate).r, texture(plane1, coordinate).r, texture(plane2, coordinate).r);\n"
    "    colour = vec4(clamp(matrix * (samples * scale - offset), 0.0, 1.0), 1.0);\n"
    "}\n";

static const char *overlay_vertex =
    "#version 330 core\n"
    "uniform vec4 rect;\n" /* x, y, width, height in normalised device coordinates */
    "out vec2 coordinate;\n"
    "void main() {\n"
    "    coordinate = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1));\n"
    "    gl_Position = vec4(rect.x + coordinate.x * rect.z, rect.y - coordinate.y * rect.w, 0.0, 1.0);\n"
    "}\n";

static const char *overlay_fragment =
    "#version 330 core\n"
    "in vec2 coordinate;\n"
    "out vec4 colour;\n"
    "uniform sampler2D text;\n"
    "void main() {\n"
    "    vec4 texel = texture(text, coordinate);\n"
    "    colour = vec4(mix(vec3(0.0), texel.rgb, texel.a), 0.6 + 0.4 * texel.a);\n"
    "}\n";

static GLuint compile(GLenum kind, const char *source, char *error, size_t error_size) {
    GLuint shader = glCreateShader(kind);
    glShaderSource(shader, 1, &source, NULL);
    glCompileShader(shader);
    GLint ok = 0;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[512] = "";
        glGetShaderInfoLog(shader, sizeof log, NULL, log);
        snprintf(error, error_size, "a shader did not compile: %s", log);
        glDeleteShader(shader);
        return 0;
    }
    return shader;
}

static GLuint link_program(const char *vertex_source, const char *fragment_source, char *error, size_t error_size) {
    GLuint vertex = compile(GL_VERTEX_SHADER, vertex_source, error, error_size);
    GLuint fragment = vertex ? compile(GL_FRAGMENT_SHADER, fragment_source, error, error_size) : 0;
    if (!fragment) {
        if (vertex) glDeleteShader(vertex);
        return 0;
    }
    GLuint program = glCreateProgram();
    glAttachShader(program, vertex);
    glAttachShader(program, fragment);
    glLinkProgram(program);
    glDeleteShader(vertex);
    glDeleteShader(fragment);
    GLint ok = 0;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[512] = "";
        glGetProgramInfoLog(program, sizeof log, NULL, log);
        snprintf(error, error_size, "the shaders did not link: %s", log);
        glDeleteProgram(program);
        return 0;
    }
    return program;
}

struct view_renderer *view_renderer_create(char *error, size_t error_size) {
    struct view_renderer *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    r->picture_program = link_program(picture_vertex, picture_fragment, error, error_size);
    r->overlay_program = r->picture_program ? link_program(overlay_vertex, overlay_fragment, error, error_size) : 0;
    if (!r->overlay_program) {
        if (r->picture_program) glDeleteProgram(r->picture_program);
        free(r);
        return NULL;
    }
    glGenVertexArrays(1, &r->vertex_array);
    glUseProgram(r->picture_program);
    for (int i = 0; i < VIEW_MAX_PLANES; i++) {
        char name[8] = "plane0";
        name[5] = (char)('0' + i);
        glUniform1i(glGetUniformLocation(r->picture_program, name), i);
    }
    r->u_half_size = glGetUniformLocation(r->picture_program, "half_size");
    r->u_turn = glGetUniformLocation(r->picture_program, "turn");
    r->u_box_half = glGetUniformLocation(r->picture_program, "box_half");
    r->u_crop = glGetUniformLocation(r->picture_program, "crop");
    r->u_flip = glGetUniformLocation(r->picture_program, "flip");
    r->u_layout = glGetUniformLocation(r->picture_program, "arrangement");
    r->u_scale = glGetUniformLocation(r->picture_program, "scale");
    r->u_offset = glGetUniformLocation(r->picture_program, "offset");
    r->u_matrix = glGetUniformLocation(r->picture_program, "matrix");
    glUseProgram(r->overlay_program);
    glUniform1i(glGetUniformLocation(r->overlay_program, "text"), 0);
    r->u_overlay_rect = glGetUniformLocation(r->overlay_program, "rect");
    return r;
}

int view_renderer_largest_texture(void) {
    GLint largest = 0;
    glGetIntegerv(GL_MAX_TEXTURE_SIZE, &largest);
    return largest > 0 ? largest : 2048; /* the least OpenGL 3.3 promises */
}

void view_renderer_destroy(struct view_renderer *r) {
    if (!r) return;
    glDeleteTextures(VIEW_MAX_PLANES, r->planes);
    if (r->overlay) glDeleteTextures(1, &r->overlay);
    glDeleteVertexArrays(1, &r->vertex_array);
    glDeleteProgram(r->picture_program);
    glDeleteProgram(r->overlay_program);
    free(r);
}

static void texel_format(enum view_texel texel, GLint *internal, GLenum *format, GLenum *type, GLint *alignment) {
    switch (texel) {
    case VIEW_TEXEL_R8: *internal = GL_R8, *format = GL_RED, *type = GL_UNSIGNED_BYTE, *alignment = 1; return;
    case VIEW_TEXEL_RG8: *internal = GL_RG8, *format = GL_RG, *type = GL_UNSIGNED_BYTE, *alignment = 2; return;
    case VIEW_TEXEL_R16: *internal = GL_R16, *format = GL_RED, *type = GL_UNSIGNED_SHORT, *alignment = 2; return;
    case VIEW_TEXEL_RG16: *internal = GL_RG16, *format = GL_RG, *type = GL_UNSIGNED_SHORT, *alignment = 4; return;
    }
}

void view_renderer_upload(struct view_renderer *r, const struct view_picture *picture,
                          const struct streamrecv_shm_slot *slot, const uint8_t *data) {
    int remake = !r->have_picture || !view_picture_same_textures(picture, &r->picture);
    for (uint32_t i = 0; i < picture->plane_count; i++) {
        GLint internal = GL_R8, alignment = 1;
        GLenum format = GL_RED, type = GL_UNSIGNED_BYTE;
        texel_format(picture->texel[i], &internal, &format, &type, &alignment);
        glActiveTexture(GL_TEXTURE0 + i);
        if (remake) {
            if (r->planes[i]) glDeleteTextures(1, &r->planes[i]);
            glGenTextures(1, &r->planes[i]);
            glBindTexture(GL_TEXTURE_2D, r->planes[i]);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
            glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
            glTexImage2D(GL_TEXTURE_2D, 0, internal, (GLsizei)picture->texels_wide[i], (GLsizei)picture->texels_high[i],
                         0, format, type, NULL);
        } else {
            glBindTexture(GL_TEXTURE_2D, r->planes[i]);
        }
        glPixelStorei(GL_UNPACK_ALIGNMENT, alignment);
        glPixelStorei(GL_UNPACK_ROW_LENGTH, (GLint)picture->row_texels[i]);
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, (GLsizei)picture->texels_wide[i], (GLsizei)picture->texels_high[i],
                        format, type, data + slot->plane_offset[i]);
    }
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    r->picture = *picture;
    r->have_picture = 1;
}

void view_renderer_set_overlay(struct view_renderer *r, const void *rgba, int width, int height, int pitch) {
    if (!rgba) {
        r->overlay_width = 0;
        return;
    }
    if (!r->overlay) {
        glGenTextures(1, &r->overlay);
        glBindTexture(GL_TEXTURE_2D, r->overlay);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    }
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, r->overlay);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, pitch / 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    r->overlay_width = width;
    r->overlay_height = height;
}

static void draw_picture(struct view_renderer *r, int window_width, int window_height) {
    const struct view_picture *p = &r->picture;
    int x, y, width, height;
    view_fit(p, window_width, window_height, &x, &y, &width, &height);
    if (width <= 0 || height <= 0) return;
    glViewport(x, window_height - y - height, width, height);
    glUseProgram(r->picture_program);
    double c = cos(p->rotation), s = sin(p->rotation);
    double box_w = p->aspect * fabs(c) + fabs(s), box_h = p->aspect * fabs(s) + fabs(c);
    GLfloat turn[4] = { (GLfloat)c, (GLfloat)s, (GLfloat)-s, (GLfloat)c }; /* column-major */
    glUniform2f(r->u_half_size, p->aspect / 2, 0.5f);
    glUniformMatrix2fv(r->u_turn, 1, GL_FALSE, turn);
    glUniform2f(r->u_box_half, (GLfloat)(box_w / 2), (GLfloat)(box_h / 2));
    glUniform4fv(r->u_crop, 1, p->crop);
    glUniform2f(r->u_flip, p->flip_horizontal ? -1.0f : 1.0f, p->flip_vertical ? -1.0f : 1.0f);
    glUniform1i(r->u_layout, (GLint)p->layout);
    glUniform1f(r->u_scale, p->scale);
    glUniform3fv(r->u_offset, 1, p->offset);
    glUniformMatrix3fv(r->u_matrix, 1, GL_FALSE, p->matrix);
    for (uint32_t i = 0; i < p->plane_count; i++) {
        glActiveTexture(GL_TEXTURE0 + i);
        glBindTexture(GL_TEXTURE_2D, r->planes[i]);
    }
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
}

void view_renderer_draw(struct view_renderer *r, int window_width, int window_height) {
    glViewport(0, 0, window_width, window_height);
    glClearColor(0, 0, 0, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    glBindVertexArray(r->vertex_array);
    if (r->have_picture) draw_picture(r, window_width, window_height);
    if (r->overlay_width > 0 && window_width > 0 && window_height > 0) {
        glViewport(0, 0, window_width, window_height);
        glEnable(GL_BLEND);
        glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
        glUseProgram(r->overlay_program);
        float w = 2.0f * (float)r->overlay_width / (float)window_width;
        float h = 2.0f * (float)r->overlay_height / (float)window_height;
        glUniform4f(r->u_overlay_rect, -1.0f + 16.0f / window_width, 1.0f - 16.0f / window_height, w, h);
        glActiveTexture(GL_TEXTURE0);
        glBindTexture(GL_TEXTURE_2D, r->overlay);
        glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
        glDisable(GL_BLEND);
    }
}
