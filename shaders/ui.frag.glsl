#version 330 core
// ui.frag.glsl - status bar, panels, plot dots and text. Text textures are
// white glyphs with coverage in alpha (SDL_ttf "blended"), tinted by u_color;
// u_textured 0 draws a flat rectangle of u_color; u_round 1 a disc inscribed
// in the rectangle (the dots of the attention distance plot), anti-aliased;
// u_round 2 a line segment (quad.vert.glsl's u_seg) with anti-aliased long edges.

uniform sampler2D u_tex;
uniform vec4 u_color;     // straight (non-premultiplied) RGBA
uniform float u_textured; // 1: multiply by the texture's alpha
uniform float u_round;    // 1: a disc, 2: a segment

in vec2 v_uv;
out vec4 frag;

void main() {
    float a = u_color.a;
    if (u_textured > 0.5) a *= texture(u_tex, v_uv).a;
    if (u_round > 1.5) {
        float e = abs(v_uv.y - 0.5); // 0 on the segment's axis, 0.5 at its edges
        float aa = max(fwidth(e), 1e-4);
        a *= 1.0 - smoothstep(0.5 - aa, 0.5, e);
    } else if (u_round > 0.5) {
        float r = length(v_uv - 0.5);
        float aa = max(fwidth(r), 1e-4);
        a *= 1.0 - smoothstep(0.5 - aa, 0.5, r);
    }
    frag = vec4(u_color.rgb, a);
}
