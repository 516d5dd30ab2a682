#version 330 core
// heatmap.frag.glsl - the crop the model saw with the map over it.
// The map is a [gh, gw] float texture already normalised to [0, 1], sampled
// nearest so every patch is one flat cell. Its colour comes from the 256-entry
// colormap LUT by the same index as the CPU export (colormap.h):
// round(v * 255), blended as mix(image, colour, opacity).

uniform sampler2D u_image; // [S, S] RGB, linear filtering
uniform sampler2D u_map;   // [gh, gw] R32F, nearest
uniform sampler2D u_lut;   // [256, 1] RGB8, texelFetch
uniform float u_opacity;   // 0 .. 1; 0 also when the overlay is off
uniform float u_grid;      // 1: draw the patch grid
uniform vec2 u_grid_size;  // (gw, gh)

in vec2 v_uv;
out vec4 frag;

void main() {
    vec3 img = texture(u_image, v_uv).rgb;
    float v = clamp(texture(u_map, v_uv).r, 0.0, 1.0);
    vec3 col = texelFetch(u_lut, ivec2(int(v * 255.0 + 0.5), 0), 0).rgb;
    vec3 rgb = mix(img, col, u_opacity);

    // Patch grid: lines one framebuffer pixel wide at the patch borders,
    // anti-aliased by the distance to the border measured in pixels (fwidth).
    vec2 g = v_uv * u_grid_size;
    vec2 d = abs(fract(g + 0.5) - 0.5) / max(fwidth(g), vec2(1e-6));
    float line = 1.0 - clamp(min(d.x, d.y), 0.0, 1.0);
    rgb = mix(rgb, vec3(1.0), 0.45 * line * u_grid);

    frag = vec4(rgb, 1.0);
}
