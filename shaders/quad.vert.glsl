#version 330 core
// quad.vert.glsl - one axis-aligned rectangle, no vertex buffer: the four
// corners of a triangle strip come from gl_VertexID.
// u_rect: x, y, w, h in framebuffer px, origin top-left, y down.
// u_uv:   texture coordinates of the top-left (xy) and bottom-right (zw) corners.

uniform vec2 u_screen; // framebuffer size, px
uniform vec4 u_rect;
uniform vec4 u_uv;

out vec2 v_uv;

void main() {
    vec2 corner = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1)); // (0,0) (1,0) (0,1) (1,1)
    vec2 px = u_rect.xy + corner * u_rect.zw;
    gl_Position = vec4(px.x / u_screen.x * 2.0 - 1.0, 1.0 - px.y / u_screen.y * 2.0, 0.0, 1.0);
    v_uv = mix(u_uv.xy, u_uv.zw, corner);
}
