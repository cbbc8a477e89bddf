#!/usr/bin/env python3
# cudnn-conv-probe.py — times cuDNN (through torch) on the codec decoder's 90
# residual convolutions at the streaming shapes (T new samples per stream per
# frame, causal history in front), FP16 in and out, to compare with
# gepard's own FP16 conv kernels (scripts/ncu-codec.sh). A measurement aid
# for issue 11, run on the GPU machine; not part of the build.
import sys, time
import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
dev = "cuda"
stages = [(432, 8), (216, 64), (108, 256), (54, 512), (27, 1024)]
kernels, dilations = (3, 7, 11), (1, 3, 5)


def convs_for(n, layout):
    work = []
    for si, (c, t) in enumerate(stages):
        for k in kernels:
            for d in dilations:
                for dd in (d, 1):
                    w_in = t + (k - 1) * dd
                    if layout == "nhwc":
                        x = torch.randn(n, c, 1, w_in, device=dev, dtype=torch.half).to(
                            memory_format=torch.channels_last)
                        w = (torch.randn(c, c, 1, k, device=dev, dtype=torch.half) * 0.05).to(
                            memory_format=torch.channels_last)
                    else:
                        x = torch.randn(n, c, w_in, device=dev, dtype=torch.half)
                        w = torch.randn(c, c, k, device=dev, dtype=torch.half) * 0.05
                    b = torch.randn(c, device=dev, dtype=torch.half)
                    work.append((si, x, w, b, dd))
    return work


def run(work, layout, only=None):
    for si, x, w, b, dd in work:
        if only is not None and si != only:
            continue
        if layout == "nhwc":
            F.conv2d(x, w, b, dilation=(1, dd))
        else:
            F.conv1d(x, w, b, dilation=dd)


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best


print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name())
flop_frame = 2.0 * sum(c * c * k * t * 2 * 3 for c, t in stages for k in kernels)
for layout in ("nhwc", "ncw"):
    for n in [int(a) for a in (sys.argv[1:] or ["1", "16", "64", "256"])]:
        work = convs_for(n, layout)
        for _ in range(3):
            run(work, layout)  # benchmark mode picks algorithms
        torch.cuda.synchronize()
        per_stage = [timed(lambda: run(work, layout, s), 5) for s in range(5)]
        total = timed(lambda: run(work, layout), 5)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run(work, layout)
        graph = timed(lambda: g.replay(), 10)
        print("%s n=%4d: 90 convs %.3f ms (graph %.3f ms) = %.0f frames/s, %.0f TFLOP/s; "
              "stages %s ms" % (layout, n, total, graph, n / graph * 1e3,
                                flop_frame * n / graph / 1e9,
                                " ".join("%.3f" % t for t in per_stage)))
        del work, g
        torch.cuda.empty_cache()
