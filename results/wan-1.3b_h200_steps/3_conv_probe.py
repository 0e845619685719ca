"""Probe: ways to run the Wan-VAE's 96-channel 3x3x3 conv at 480x832 (the slow sm80 kernel).

Kept exactly as it ran for 3_conv_probe.txt (each lambda is called inside its loop iteration)."""
# ruff: noqa
import time
import torch
import torch.nn.functional as F

dev = torch.device("cuda")
torch.manual_seed(0)
T = 12


def bench(name, fn, flops, reps=20):
    for _ in range(3):
        out = fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - s) / reps * 1e3
    print(f"{name:<44} {ms:7.2f} ms  {flops / ms / 1e9:6.0f} TFLOP/s", flush=True)
    return out


for C, H, W in ((96, 480, 832), (192, 240, 416)):
    x = torch.randn(1, C, T + 2, H, W, device=dev, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    w = (torch.randn(C, C, 3, 3, 3, device=dev, dtype=torch.bfloat16) * 0.02)
    flops = 2 * C * C * 27 * T * H * W
    wcl = w.contiguous(memory_format=torch.channels_last_3d)
    for bm in (False, True):
        torch.backends.cudnn.benchmark = bm
        tag = f"C={C} bench={bm}"
        ref = bench(f"{tag} conv3d cl", lambda: F.conv3d(x, wcl, None, padding=(0, 1, 1)), flops)
        xn = x.contiguous()
        bench(f"{tag} conv3d ncdhw", lambda: F.conv3d(xn, w, None, padding=(0, 1, 1)), flops)
        frames = x[0].permute(1, 0, 2, 3)  # (T+2, C, H, W) channels-last 2-D view
        w2 = [w[:, :, dt].contiguous(memory_format=torch.channels_last) for dt in range(3)]

        def three():
            out = F.conv2d(frames[0:T], w2[0], None, padding=1)
            out += F.conv2d(frames[1:T + 1], w2[1], None, padding=1)
            out += F.conv2d(frames[2:T + 2], w2[2], None, padding=1)
            return out
        got = bench(f"{tag} 3 x conv2d summed", three, flops)
        if C == 96 and not bm:
            r = ref[0].permute(1, 0, 2, 3).float()
            print("   3 x conv2d max rel err", float((got.float() - r).abs().max() / r.abs().max()))
        wst = torch.cat([w[:, :, dt] for dt in range(3)], dim=1).contiguous(memory_format=torch.channels_last)

        def stacked():
            st = torch.cat([frames[dt:dt + T] for dt in range(3)], dim=1)
            return F.conv2d(st, wst, None, padding=1)
        got = bench(f"{tag} stacked 3C conv2d (incl. stacking)", stacked, flops)
        if C == 96 and not bm:
            print("   stacked max rel err", float((got.float() - r).abs().max() / r.abs().max()))
        st = torch.cat([frames[dt:dt + T] for dt in range(3)], dim=1)
        bench(f"{tag} stacked 3C conv2d (conv only)", lambda: F.conv2d(st, wst, None, padding=1), flops)
torch.backends.cudnn.benchmark = False
