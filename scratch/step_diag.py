"""Diagnose the ViT-B HOT step: variants in fresh processes, and a profile."""
import json, os, subprocess, sys, time, statistics, warnings
warnings.simplefilter("ignore")
import torch

def run(variant, head, lqs, fused, profile=False, steps=20, warmup=5):
    import timm, hot
    from hot.bench.step import time_training, train_step
    torch.manual_seed(0)
    net = timm.create_model("vit_base_patch16_224", num_classes=100)
    if variant == "hot":
        cfg = hot.HOTConfig(backend="real", abc=True, lqs=lqs, fused_grad_output=fused)
        hot.convert(net, cfg, exclude=[] if head else ["head"])
    net = net.cuda().train()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(128, 3, 224, 224, device="cuda", generator=g); y = torch.randint(0, 100, (128,), device="cuda", generator=g)
    r = time_training(net, x, y, steps=steps, warmup=warmup, calibrate_lqs=(variant == "hot" and lqs))
    out = {"variant": variant, "head": head, "lqs": lqs, "fused": fused, "step_ms": r["step_ms"], "peak_gib": r["peak_memory_gib"], "lqs_dec": r.get("lqs")}
    if profile:
        from torch.profiler import profile as prof, ProfilerActivity
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        for _ in range(2): train_step(net, opt, x, y, True)
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(3): train_step(net, opt, x, y, True)
            torch.cuda.synchronize()
        ka = p.key_averages()
        kern = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        out["kernels_per_step"] = len(kern) / 3
        with open(os.environ["OUT"] + f"/profile_{variant}_{int(head)}{int(lqs)}{int(fused)}.txt", "w") as f:
            f.write(ka.table(sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=60))
            f.write("\n\nBY COUNT\n")
            f.write(ka.table(sort_by="count", row_limit=45, max_name_column_width=60))
    print(json.dumps(out), flush=True)

if __name__ == "__main__":
    if len(sys.argv) > 1:
        a = sys.argv[1:]
        run(a[0], a[1] == "1", a[2] == "1", a[3] == "1", profile=len(a) > 4)
    else:
        for args in [("bf16","0","0","0"), ("hot","1","1","0","p"), ("hot","0","1","0"), ("hot","0","0","0"), ("hot","0","0","1","p"), ("hot","1","1","0")]:
            subprocess.run([sys.executable, __file__, *args], check=False)
