#version 330 core
// quad.vert.glsl - one axis-aligned rectangle, no vertex buffer: the four
// corners of a triangle strip come from gl_VertexID.
// u_rect: x, y, w, h in framebuffer px, origin top-left, y down.
// u_uv:   texture coordinates of the top-left (xy) and bottom-right (zw) corners.
// u_seg_w > 0: a line segment from u_seg.xy to u_seg.zw (px) instead, u_seg_w px wide
// and as long plus half its width at each end, so that segments join (the plot's
// curve); v_uv runs 0..1 along it (x) and across it (y).

uniform vec2 u_screen; // framebuffer size, px
uniform float u_flip;  // 1: GL's rows, bottom first (the window); -1: top row first (the
                       // canvas, in the window's own row order: shown by a plain copy)
uniform vec4 u_rect;
uniform vec4 u_uv;
uniform vec4 u_seg;    // x0, y0, x1, y1 px
uniform float u_seg_w; // px; 0: draw u_rect

out vec2 v_uv;

void main() {
    vec2 corner = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1)); // (0,0) (1,0) (0,1) (1,1)
    vec2 px = u_rect.xy + corner * u_rect.zw;
    if (u_seg_w > 0.0) {
        vec2 d = u_seg.zw - u_seg.xy;
        float len = max(length(d), 1e-6);
        vec2 t = d / len, n = vec2(-t.y, t.x);
        px = u_seg.xy + t * ((corner.x * (len + u_seg_w)) - 0.5 * u_seg_w) +
             n * ((corner.y - 0.5) * u_seg_w);
    }
    gl_Position = vec4(px.x / u_screen.x * 2.0 - 1.0, u_flip * (1.0 - px.y / u_screen.y * 2.0), 0.0,
                       1.0);
    v_uv = mix(u_uv.xy, u_uv.zw, corner);
}
