// An overlay drawing's boxes and masks drawn by the GPU into the overlay
// plane's buffer: premultiplied ARGB8888 (bytes B, G, R, A), the format KMS
// blends over the video. One thread a pixel; the shapes in order, each
// composited "over" what is drawn before it, from a transparent start.
// A pixel belongs to a shape when its centre does (whole pixels for whole
// coordinates, as cairo draws them); a mask is sampled at the nearest of
// its pixels. Text, labels and polylines are cairo's (sits/overlay/render.py).

struct SitsShape {
	float x0, y0, x1, y1;   // a box's corners; a mask's rectangle on the frame
	float line;             // a box's outline width, inside its corners (0: none)
	float sx, sy;           // a mask's pixels per frame pixel
	unsigned int rgba;      // straight R, G, B, A bytes, R lowest
	unsigned int fill;      // a box's fill alpha, already times its colour's (0..255)
	int kind;               // 0: a box, 1: a mask
	int mask_at, mask_w, mask_h;    // a mask's bytes in `masks`, its size
};

__device__ static void over(float4 &p, unsigned int rgba, float k)
{
	// k: the source's alpha at this pixel (its colour's alpha times coverage)
	float r = (rgba & 255u) / 255.0f, g = ((rgba >> 8) & 255u) / 255.0f, b = ((rgba >> 16) & 255u) / 255.0f;
	p.x = r * k + p.x * (1.0f - k);
	p.y = g * k + p.y * (1.0f - k);
	p.z = b * k + p.z * (1.0f - k);
	p.w = k + p.w * (1.0f - k);
}

extern "C" __global__ void sits_overlay_draw(unsigned char *out, int width, int height, int pitch,
					     const SitsShape *shapes, int n, const unsigned char *masks)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x >= width || y >= height)
		return;
	float px = x + 0.5f, py = y + 0.5f;
	float4 p = make_float4(0.0f, 0.0f, 0.0f, 0.0f);     // R, G, B, A premultiplied
	for (int i = 0; i < n; i++) {
		SitsShape s = shapes[i];
		if (px < s.x0 || px >= s.x1 || py < s.y0 || py >= s.y1)
			continue;
		float a = (s.rgba >> 24) / 255.0f;
		if (s.kind == 0) {
			if (s.fill)
				over(p, s.rgba, s.fill / 255.0f);
			float l = s.line;
			if (l > 0.0f && (2.0f * l >= fminf(s.x1 - s.x0, s.y1 - s.y0) || px < s.x0 + l || px >= s.x1 - l
					 || py < s.y0 + l || py >= s.y1 - l))
				over(p, s.rgba, a);
		} else {
			int mx = min(max((int)((px - s.x0) * s.sx), 0), s.mask_w - 1);
			int my = min(max((int)((py - s.y0) * s.sy), 0), s.mask_h - 1);
			over(p, s.rgba, a * (masks[s.mask_at + my * s.mask_w + mx] / 255.0f));
		}
	}
	uchar4 v = make_uchar4((unsigned char)__float2int_rn(p.z * 255.0f), (unsigned char)__float2int_rn(p.y * 255.0f),
			       (unsigned char)__float2int_rn(p.x * 255.0f), (unsigned char)__float2int_rn(p.w * 255.0f));
	*(uchar4 *)(out + (size_t)y * pitch + (size_t)x * 4) = v;
}
