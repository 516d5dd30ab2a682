#version 330 core
// heatmap.frag.glsl - the crop the model saw with a map over it, for the main
// view, the overview thumbnails and the legend's colour bar.
//
// Compiled once per combination of the features a draw uses (render.c puts the
// #defines below after the #version line), so that every pixel pays only for what
// is on screen: the plain view is one image sample, one map texel and one LUT
// entry per pixel; the grid, the mask outline or the query box cost only when drawn.
//   BILINEAR  bilinear upsampling between patch centres (else nearest)
//   RGB       the map is RGBA32F colours (the feature PCA), A the foreground weight:
//             mix(image, rgb, opacity * A), no colormap
//   RAMP      the colour bar: value = 1 - v (top is the maximum), no map
//   REMOVED   the patches a perturbation test removed, drawn flat in u_fill
//   GRID      the patch grid, lines one framebuffer pixel wide
//   MASK      the outline of the attention mask (DINO)
//   QUERY     the box of the query patch
//   MINIFY    the crop drawn smaller than its texture: mipmapped sampling (the
//             overview's thumbnails); else one bilinear sample at mip level 0
//   PLAIN     the image alone (no heat, nothing on it: the overlay off, or a picture
//             with its maps drawn in, as the compare view's): one sample a pixel
//
// The map is a [gh, gw] block of a float texture (one map, or an atlas of the
// overview's maps at texel u_cell), already normalised to [0, 1]. It is read
// with texelFetch and upsampled here: nearest (every patch one flat cell) or
// bilinear between patch centres (clamped at the border), as the CPU export
// does (export.c). Its colour comes from the 256-entry colormap LUT by the same
// index, round(v * 255), blended as mix(image, colour, opacity).
// The patches a perturbation test removed are drawn flat in u_fill, the colour
// the model's normalisation maps to 0, without heat: what the model sees there.
// On top: the patch grid, the outline of the attention mask and the box of the
// query patch, all sized in framebuffer px via fwidth.

uniform sampler2D u_image;   // [S, S] RGB, linear filtering (mipmapped for MINIFY)
uniform sampler2D u_map;     // R32F (RGBA32F with RGB), texelFetch only
uniform sampler2D u_lut;     // [256, 1] RGB8, texelFetch
uniform sampler2D u_mask;    // [gh, gw] R8: 1 inside the mask
uniform sampler2D u_removed; // [gh, gw] R8: 1 where a perturbation test removed the patch
uniform float u_opacity;     // 0 .. 1; 0 also when the overlay is off
uniform vec2 u_grid_size;    // the map's size (w, h): (gw, gh), or (Sw, Sh) for a pixel map
uniform vec2 u_patches;      // (gw, gh): the patch grid the grid lines and the query box are on
uniform ivec2 u_cell;        // texel origin of this map in u_map
uniform ivec2 u_query;       // (col, row) of the query patch
uniform float u_line_px;     // width of the mask outline and the query box, px
uniform vec3 u_fill;         // RGB in [0, 1]

in vec2 v_uv;
out vec4 frag;

vec4 map_at(ivec2 p) { // R32F reads as (v, 0, 0, 1)
    p = clamp(p, ivec2(0), ivec2(u_grid_size) - 1);
    return texelFetch(u_map, u_cell + p, 0);
}

#ifdef MASK
float mask_at(ivec2 p) {
    if (any(lessThan(p, ivec2(0))) || any(greaterThanEqual(p, ivec2(u_grid_size)))) return 0.0;
    return texelFetch(u_mask, p, 0).r > 0.0 ? 1.0 : 0.0; // R8: 1 reads as 1/255
}
#endif

void main() {
#ifdef RAMP
    vec3 rgb = texelFetch(u_lut, ivec2(int((1.0 - v_uv.y) * 255.0 + 0.5), 0), 0).rgb;
#else
#ifdef MINIFY
    vec3 img = texture(u_image, v_uv).rgb;
#else
    vec3 img = textureLod(u_image, v_uv, 0.0).rgb; // no mipmaps: no derivatives needed
#endif
#ifdef PLAIN
    frag = vec4(img, 1.0);
    return;
#endif
    vec2 g = v_uv * u_grid_size; // position in map cells
    ivec2 c = ivec2(floor(g));
#ifdef BILINEAR
    vec2 t = g - 0.5; // cell centres at integer t
    ivec2 i0 = ivec2(floor(t));
    vec2 f = t - floor(t);
    vec4 top = mix(map_at(i0), map_at(i0 + ivec2(1, 0)), f.x);
    vec4 bot = mix(map_at(i0 + ivec2(0, 1)), map_at(i0 + ivec2(1, 1)), f.x);
    vec4 m = clamp(mix(top, bot, f.y), 0.0, 1.0);
#else
    vec4 m = clamp(map_at(c), 0.0, 1.0);
#endif
#ifdef RGB
    vec3 rgb = mix(img, m.rgb, u_opacity * m.a);
#else
    vec3 col = texelFetch(u_lut, ivec2(int(m.r * 255.0 + 0.5), 0), 0).rgb;
    vec3 rgb = mix(img, col, u_opacity);
#endif
#ifdef REMOVED
    ivec2 pc = clamp(ivec2(floor(v_uv * u_patches)), ivec2(0), ivec2(u_patches) - 1);
    if (texelFetch(u_removed, pc, 0).r > 0.0) rgb = u_fill;
#endif
#if defined(GRID) || defined(QUERY)
    vec2 gp = v_uv * u_patches;              // position in patches
    vec2 pp = max(fwidth(gp), vec2(1e-6));   // patches per px
#endif
#ifdef GRID
    // Lines one framebuffer pixel wide at the patch borders, anti-aliased by the
    // distance to the border measured in pixels (fwidth). On the patch grid
    // whatever the map's size (a pixel map has its own).
    vec2 d = abs(fract(gp + 0.5) - 0.5) / pp;
    float line = 1.0 - clamp(min(d.x, d.y), 0.0, 1.0);
    rgb = mix(rgb, vec3(1.0), 0.45 * line);
#endif
    float w = u_line_px;
#ifdef MASK
    // The outline: on both sides of every border between a cell inside the mask
    // and one outside, a white band with a dark halo, visible on any colormap.
    // Distances (px) from this fragment to its map cell's four borders:
    vec2 px = max(fwidth(g), vec2(1e-6)); // map cells per px
    vec2 fc = g - vec2(c);
    float dl = fc.x / px.x, dr = (1.0 - fc.x) / px.x, dt = fc.y / px.y, db = (1.0 - fc.y) / px.y;
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
#endif
#ifdef QUERY
    // The query patch: a pink box inside its patch, dark edged.
    ivec2 cp = ivec2(floor(gp));
    if (cp == u_query) {
        vec2 fp = gp - vec2(cp);
        float e2 = min(min(fp.x, 1.0 - fp.x) / pp.x, min(fp.y, 1.0 - fp.y) / pp.y);
        if (e2 < 1.0)
            rgb = vec3(0.0);
        else if (e2 < 1.0 + 1.5 * w)
            rgb = vec3(1.0, 0.18, 0.55);
        else if (e2 < 2.0 + 1.5 * w)
            rgb = vec3(0.0);
    }
#endif
#endif // RAMP
    frag = vec4(rgb, 1.0);
}
