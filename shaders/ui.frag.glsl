#version 330 core
// ui.frag.glsl - status bar, panels and text. Text textures are white glyphs
// with coverage in alpha (SDL_ttf "blended"), tinted by u_color; u_textured 0
// draws a flat rectangle of u_color.

uniform sampler2D u_tex;
uniform vec4 u_color;     // straight (non-premultiplied) RGBA
uniform float u_textured; // 1: multiply by the texture's alpha

in vec2 v_uv;
out vec4 frag;

void main() {
    float a = u_color.a;
    if (u_textured > 0.5) a *= texture(u_tex, v_uv).a;
    frag = vec4(u_color.rgb, a);
}
