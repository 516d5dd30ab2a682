#version 330 core
// heatmap.frag.glsl - the crop the model saw with a map over it, for the main
// view, the overview thumbnails and the legend's colour bar.
// The map is a [gh, gw] block of a float texture (one map, or an atlas of the
// overview's maps at texel u_cell), already normalised to [0, 1]. It is read
// with texelFetch and upsampled here: nearest (every patch one flat cell) or
// bilinear between patch centres (clamped at the border), as the CPU export
// does (export.c). Its colour comes from the 256-entry colormap LUT by the same
// index, round(v * 255), blended as mix(image, colour, opacity).
// The patches a perturbation test removed are drawn flat in u_fill, the colour
// the model's normalisation maps to 0, without heat: what the model sees there.
// On top: the patch grid, the outline of the attention mask (DINO) and the box
// of the query patch, all sized in framebuffer px via fwidth.

uniform sampler2D u_image; // [S, S] RGB, linear (mipmapped) filtering
uniform sampler2D u_map;   // R32F, texelFetch only
uniform sampler2D u_lut;   // [256, 1] RGB8, texelFetch
uniform sampler2D u_mask;  // [gh, gw] R8: 1 inside the mask
uniform float u_opacity;   // 0 .. 1; 0 also when the overlay is off
uniform float u_grid;      // 1: draw the patch grid
uniform vec2 u_grid_size;  // the map's size (w, h): (gw, gh), or (Sw, Sh) for a pixel map
uniform vec2 u_patches;    // (gw, gh): the patch grid the grid lines and the query box are on
uniform ivec2 u_cell;      // texel origin of this map in u_map
uniform float u_bilinear;  // 1: bilinear upsampling, 0: nearest
uniform float u_mask_on;   // 1: outline the mask
uniform ivec2 u_query;     // (col, row) of the query patch; (-1, -1): the CLS token
uniform float u_line_px;   // width of the mask outline and the query box, px
uniform float u_ramp;      // 1: the colour bar: value = 1 - v (top is the maximum)
uniform float u_rgb;       // 1: u_map is RGBA32F colours (the feature PCA), A the foreground:
                           // drawn as they are, mix(image, rgb, opacity * A), no colormap
uniform sampler2D u_removed; // [gh, gw] R8: 1 where a perturbation test removed the patch
uniform float u_removed_on;  // 1: draw the removed patches in u_fill
uniform vec3 u_fill;         // RGB in [0, 1]

in vec2 v_uv;
out vec4 frag;

vec4 map_at(ivec2 p) { // R32F reads as (v, 0, 0, 1)
    p = clamp(p, ivec2(0), ivec2(u_grid_size) - 1);
    return texelFetch(u_map, u_cell + p, 0);
}

float mask_at(ivec2 p) {
    if (any(lessThan(p, ivec2(0))) || any(greaterThanEqual(p, ivec2(u_grid_size)))) return 0.0;
    return texelFetch(u_mask, p, 0).r > 0.0 ? 1.0 : 0.0; // R8: 1 reads as 1/255
}

void main() {
    vec3 img = texture(u_image, v_uv).rgb;
    vec2 g = v_uv * u_grid_size; // position in patches
    ivec2 c = ivec2(floor(g));
    vec4 m;
    if (u_ramp > 0.5) {
        m = vec4(1.0 - v_uv.y);
    } else if (u_bilinear > 0.5) {
        vec2 t = g - 0.5; // patch centres at integer t
        ivec2 i0 = ivec2(floor(t));
        vec2 f = t - floor(t);
        vec4 top = mix(map_at(i0), map_at(i0 + ivec2(1, 0)), f.x);
        vec4 bot = mix(map_at(i0 + ivec2(0, 1)), map_at(i0 + ivec2(1, 1)), f.x);
        m = mix(top, bot, f.y);
    } else {
        m = map_at(c);
    }
    m = clamp(m, 0.0, 1.0);
    vec3 rgb;
    if (u_rgb > 0.5 && u_ramp < 0.5) {
        rgb = mix(img, m.rgb, u_opacity * m.a);
    } else {
        float v = m.r;
        vec3 col = texelFetch(u_lut, ivec2(int(v * 255.0 + 0.5), 0), 0).rgb;
        rgb = mix(img, col, u_opacity);
    }
    if (u_removed_on > 0.5 && u_ramp < 0.5) {
        ivec2 pc = clamp(ivec2(floor(v_uv * u_patches)), ivec2(0), ivec2(u_patches) - 1);
        if (texelFetch(u_removed, pc, 0).r > 0.0) rgb = u_fill;
    }

    // Patch grid: lines one framebuffer pixel wide at the patch borders,
    // anti-aliased by the distance to the border measured in pixels (fwidth).
    // On the patch grid whatever the map's size (a pixel map has its own).
    vec2 gp = v_uv * u_patches;
    vec2 pp = max(fwidth(gp), vec2(1e-6)); // patches per px
    vec2 d = abs(fract(gp + 0.5) - 0.5) / pp;
    float line = 1.0 - clamp(min(d.x, d.y), 0.0, 1.0);
    rgb = mix(rgb, vec3(1.0), 0.45 * line * u_grid);

    // Distances (px) from this fragment to its map cell's four borders.
    vec2 px = max(fwidth(g), vec2(1e-6)); // map cells per px
    vec2 f = g - vec2(c);
    float dl = f.x / px.x, dr = (1.0 - f.x) / px.x, dt = f.y / px.y, db = (1.0 - f.y) / px.y;
    float w = u_line_px;

    // Mask outline: on both sides of every border between a patch inside the
    // mask and one outside: a white band with a dark halo, visible on any colormap.
    if (u_mask_on > 0.5) {
        float in0 = mask_at(c), e = 1e9;
        if (mask_at(c + ivec2(-1, 0)) != in0) e = min(e, dl);
        if (mask_at(c + ivec2(1, 0)) != in0) e = min(e, dr);
        if (mask_at(c + ivec2(0, -1)) != in0) e = min(e, dt);
        if (mask_at(c + ivec2(0, 1)) != in0) e = min(e, db);
        if (mask_at(c + ivec2(-1, -1)) != in0) e = min(e, max(dl, dt));
        if (mask_at(c + ivec2(1, -1)) != in0) e = min(e, max(dr, dt));
        if (mask_at(c + ivec2(-1, 1)) != in0) e = min(e, max(dl, db));
        if (mask_at(c + ivec2(1, 1)) != in0) e = min(e, max(dr, db));
        if (e < w)
            rgb = vec3(1.0);
        else if (e < w + 1.5)
            rgb = vec3(0.0);
    }

    // The query patch: a pink box inside its patch, dark edged.
    ivec2 cp = ivec2(floor(gp));
    if (cp == u_query) {
        vec2 fp = gp - vec2(cp);
        float e = min(min(fp.x, 1.0 - fp.x) / pp.x, min(fp.y, 1.0 - fp.y) / pp.y);
        if (e < 1.0)
            rgb = vec3(0.0);
        else if (e < 1.0 + 1.5 * w)
            rgb = vec3(1.0, 0.18, 0.55);
        else if (e < 2.0 + 1.5 * w)
            rgb = vec3(0.0);
    }
    frag = vec4(rgb, 1.0);
}
