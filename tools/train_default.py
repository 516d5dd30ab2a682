#!/usr/bin/python3
"""Train vitlens's built-in ViT on the procedural scenes of tools/gen_scenes.py.

A small ViT in timm's VisionTransformer layout and naming (cls_token, pos_embed,
patch_embed.proj, blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2},
norm, head), so the engine loads it like any timm checkpoint. CPU only, Debian's
python3-torch. Then runs tools/eval_default.py on the result.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_default.py --out assets/default

writes model.safetensors, config.json and train_log.txt into --out (and, through
eval_default.py, eval.json, demo/ and README.md, the model card).

Speed: on CPU, PyTorch 1.13 runs the attention's many small batched matmuls
(torch.bmm) one at a time, so a second thread in one process buys almost
nothing. Instead --procs processes of one thread each train on their share of
every batch and average gradients (DistributedDataParallel, gloo): twice the
throughput on 2 cores. Three more things, measured on one step of 32 scenes
(one thread): glibc returning each freed ~10 MB attention tensor to the kernel
cost ~40% of the step in page faults (keep_freed_memory: 574 -> 341 ms);
contiguous q, k, v avoid bmm's slow strided path (-> 279 ms); bfloat16 matrix
products through torch.autocast, on a CPU with AVX512-BF16 (-> 125 ms).

Curriculum: the first --flat training scenes are plain (gen_scenes.scene's
level 0: one flat background colour, a larger object), over the next --ramp
the clutter level rises linearly to 1, the rest are full scenes. The first
epoch reads the scenes roughly in index order (shuffled within windows of
--window scenes), so the model learns the shapes on plain backgrounds first;
later epochs are fully shuffled.

Why the help below: a ViT trained from scratch on labels alone learns this
slowly (it has to discover locality and colour-independent edges on its own):
a run of 40k scenes ended at 28% validation accuracy. In 300-step pilots
(19k scenes, one process) token labels and the DCT patch embedding reached 42%;
learning rates 5e-4 / 2e-3 and an MLP of 512 were slower than 1e-3 / 256.
Errors concentrated on the smallest objects (an object of radius 12 px is 3
patches across): in 1000-step pilots (32k scenes, 2 epochs) objects of radius
16-28 px reached 55.6% and 20-32 px 68.2% (with the mask targets below), where
12-24 px had reached 45.3%. At 1000 steps, the per-patch mask targets added 4
points (59.6% vs 55.6%), weight 4 instead of 1 nothing more (60.1%); 6 blocks
instead of 4 added 1 point at 1.6x the time; soft distillation from the CNN
teacher's logits (97% accurate) nothing (55.5%); a convolution-like initial
attention (each head attending to one neighbour through the position
embedding, Cordonnier et al. 2020) cost 20 points at step 500 (41% vs 61%).
Later 1000-step pilots (the same 32k scenes, this script's other defaults):
learning rate 2e-3 reached 70.7% where 1e-3 reached 67.5% (in 300-step pilots
2e-3 had looked slower); a batch of 32 instead of 64 (2000 steps, lr 7e-4)
67.0% in 2.8x the time; PatchDropout (Liu et al. 2023: each scene keeps a
random half of its patches, all of them in the last 15% of the steps) reached
the same 68% in about the same time (1500 cheaper steps), so it was not kept.

Hint (--hint, off by default): a small CNN is trained first (--teacher-steps
batches; it is not shipped) and the ViT's patch tokens after block L-2 learn,
through a linear map dropped afterwards, to reproduce its stride-8 feature map
(FitNets, Romero et al. 2015). With token labels it gave no gain per scene in
the pilots and costs a teacher forward pass per batch.

Token labels (--tokens; Jiang et al. 2021, "All Tokens Matter"): the final
patch tokens, through another linear map dropped afterwards, also predict a
label each: the scene's class in proportion to the patch's object coverage,
"background" for the rest (soft cross-entropy). Mask targets (--shape): the
patch tokens after block L-1, through a third linear map dropped afterwards,
predict the object mask inside their own patch, in 2x2 px cells (binary
cross-entropy): the shape detail a linear 8x8 patch embedding loses. These
are the only places the object masks enter training. The attention itself,
the CLS token's included, is never supervised; the card says so next to the
pointing-game scores.

Initialisation (values only, the layout is timm's): mimetic attention
(init_mimetic_) and a 2-D DCT patch embedding (init_patch_embed_); in short
pilots each sped up the start of training.
"""
import argparse
import json
import os
import platform
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scenes  # noqa: E402

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)
PATCH = 8
SUB = 2  # px: the cells of the object-mask target (--shape)


# --- the model: timm's VisionTransformer, its names -------------------------

class Block(nn.Module):
    """timm Block: x = x + attn(norm1(x)); x = x + mlp(norm2(x))."""

    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(dim, 3 * dim)
        self.attn.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(dim, mlp)
        self.mlp.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        """x [B, T, D] -> (x, attention [B, H, T, T])."""
        B, T, D = x.shape
        qkv = self.attn.qkv(self.norm1(x)).reshape(B, T, 3, self.heads, D // self.heads)
        # contiguous [B, H, T, Dh]: PyTorch 1.13's CPU bmm is several times slower on
        # the strided views the permute gives
        q, k, v = (t.contiguous() for t in qkv.permute(2, 0, 3, 1, 4))
        a = ((q * (D // self.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1)
        x = x + self.attn.proj((a @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.mlp.fc2(F.gelu(self.mlp.fc1(self.norm2(x)))), a


class ViT(nn.Module):
    def __init__(self, size, patch, dim, depth, heads, mlp, classes):
        super().__init__()
        n = (size // patch) ** 2
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.cls_token, std=1e-6)

    def forward(self, x, return_attention=False, return_tokens=False):
        """x [B, 3, S, S] normalised -> logits [B, C], and the attention of every block
        [B, H, T, T] (return_attention) or the tokens [B, T, D] after every block, the
        last one after the final norm (return_tokens)."""
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        att, tokens = [], []
        for b in self.blocks:
            x, a = b(x)
            att.append(a)
            tokens.append(x)
        x = self.norm(x)
        tokens[-1] = x
        logits = self.head(x[:, 0])
        if return_tokens:
            return logits, tokens
        return (logits, att) if return_attention else logits


class Teacher(nn.Module):
    """A small CNN, used only during training (never shipped). Convolutions know
    locality and translation, so it learns the shapes from a few thousand scenes;
    its feature map has stride 8, one 64-vector per ViT patch: the hint the ViT's
    patch tokens learn to reproduce (FitNets, Romero et al. 2015)."""

    def __init__(self, classes, ch=64):
        super().__init__()

        def conv(i, o, stride=1):
            return [nn.Conv2d(i, o, 3, stride, 1), nn.BatchNorm2d(o), nn.ReLU()]
        self.features = nn.Sequential(*conv(3, 32, 2), *conv(32, 32), nn.MaxPool2d(2),
                                      *conv(32, 64), nn.MaxPool2d(2), *conv(64, ch))
        self.head = nn.Linear(ch, classes)

    def forward(self, x):
        """x [B, 3, S, S] -> logits [B, C], features [B, ch, S/8, S/8]."""
        f = self.features(x)
        return self.head(f.amax((2, 3))), f


class Student(nn.Module):
    """The ViT plus two linear maps used only in training (dropped afterwards): from
    the patch tokens the last block attends over (after block L-2) to the teacher's
    features, and from the final patch tokens to the token labels (C + 1 classes,
    the last one background)."""

    def __init__(self, vit, classes, ch=64):
        super().__init__()
        self.vit = vit
        D = vit.pos_embed.shape[-1]
        self.hint = nn.Linear(D, ch)
        self.tok = nn.Linear(D, classes + 1)
        self.shape = nn.Linear(D, (PATCH // SUB) ** 2)

    def forward(self, x):
        """-> logits [B, C], the hint's prediction [B, N, ch], token-label logits [B, N, C+1],
        the object-mask logits of each patch's SUB x SUB px cells [B, N, (P/SUB)^2]."""
        logits, tokens = self.vit(x, return_tokens=True)
        mid = tokens[-2][:, 1:]
        return logits, self.hint(mid), self.tok(tokens[-1][:, 1:]), self.shape(mid)


def init_mimetic_(model, seed):
    """Mimetic initialisation (Trockman & Kolter 2023, "Mimetic Initialization of
    Self-Attention Layers"): per head W_q W_k^T ~ 0.7 Z + 0.7 I and per block
    W_v W_proj ~ 0.4 Z - 0.4 I (Z ~ N(0, 1/D)), with a 2-D sin-cos position
    embedding (still learned). Attention then starts out local, like a
    convolution, and the value path subtracts the neighbourhood mean, an edge
    detector that ignores the flat colours: the model learns from the first steps
    instead of sitting at chance. Only the initial values change, not the layout."""
    g = torch.Generator().manual_seed(seed)
    D = model.pos_embed.shape[-1]
    side = int(round((model.pos_embed.shape[1] - 1) ** 0.5))
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    omega = 1.0 / 10000 ** (torch.arange(D // 4) / (D // 4))
    xo, yo = xx.flatten()[:, None] * omega, yy.flatten()[:, None] * omega
    with torch.no_grad():
        model.pos_embed[0, 0] = 0
        model.pos_embed[0, 1:] = torch.cat([xo.sin(), xo.cos(), yo.sin(), yo.cos()], 1)
        for blk in model.blocks:
            W, H = blk.attn.qkv.weight, blk.heads  # W [3D, D]: rows q, k, v
            Dh = D // H
            for h in range(H):
                M = 0.7 * torch.randn(D, D, generator=g) / D ** 0.5 + 0.7 * torch.eye(D)
                U, S, Vt = torch.linalg.svd(M)
                r = S[:Dh].sqrt()
                W[h * Dh:(h + 1) * Dh] = (U[:, :Dh] * r).T            # q_h = x (U r)
                W[D + h * Dh:D + (h + 1) * Dh] = (Vt[:Dh].T * r).T    # k_h = x (V r)
            M = 0.4 * torch.randn(D, D, generator=g) / D ** 0.5 - 0.4 * torch.eye(D)
            U, S, Vt = torch.linalg.svd(M)
            r = S.sqrt()
            W[2 * D:] = (U * r).T                                     # v = x (U r)
            blk.attn.proj.weight.copy_((r[:, None] * Vt).T)           # out = v (r V^T)


def init_patch_embed_(model, imgs, how, eps=0.1):
    """Initial patch embedding (the layout does not change). 'whiten': the PCA of the
    training scenes' P x P x 3 patches (normalised pixels), each of the D leading
    components scaled to unit variance (ZCA-style patch whitening, as in fast CIFAR
    training; eps, relative to the mean eigenvalue, keeps grain from being blown up).
    'dct': the D lowest-frequency 2-D DCT-II basis patches after the constant one,
    each on a random unit mix of the colour channels."""
    W = model.patch_embed.proj.weight  # [D, 3, P, P]
    D, _, P, _ = W.shape
    if how == "whiten":
        x = to_tensor(imgs).unfold(2, P, P).unfold(3, P, P)  # [B, 3, G, G, P, P]
        x = x.permute(0, 2, 3, 1, 4, 5).reshape(-1, 3 * P * P).double()
        mean = x.mean(0)
        cov = torch.cov((x - mean).T)
        lam, vec = torch.linalg.eigh(cov)  # ascending
        lam, vec = lam.flip(0)[:D], vec.flip(1)[:, :D]
        w = (vec / (lam + eps * lam.mean()).sqrt()).T  # [D, 3 P P]
        with torch.no_grad():
            W.copy_(w.reshape(D, 3, P, P).float())
            model.patch_embed.proj.bias.copy_(-(w @ mean).float())
    elif how == "dct":
        import math
        basis = []
        for u in range(P):
            for v in range(P):
                if u or v:
                    b = torch.tensor([[math.cos(math.pi * (2 * i + 1) * u / (2 * P)) *
                                       math.cos(math.pi * (2 * j + 1) * v / (2 * P))
                                       for j in range(P)] for i in range(P)])
                    basis.append((u + v, b / b.norm()))
        basis.sort(key=lambda t: t[0])
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for d in range(D):
                mix = torch.randn(3, generator=g)
                W[d] = 4.0 * (mix / mix.norm())[:, None, None] * basis[d % len(basis)][1][None]
            model.patch_embed.proj.bias.zero_()


def to_tensor(imgs):
    """uint8 [B, S, S, 3] -> normalised float [B, 3, S, S] (timm: ToTensor, Normalize)."""
    x = torch.from_numpy(np.array(imgs, np.uint8, order="C")).permute(0, 3, 1, 2).float().div(255)
    return (x - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]


def save_safetensors(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # keep the data area 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


# --- training ----------------------------------------------------------------

class Level:
    """Clutter level of training scene i: 0 for the first `flat`, then rising to 1
    over the next `ramp`."""

    def __init__(self, flat, ramp):
        self.flat, self.ramp = flat, ramp

    def __call__(self, i):
        if i < self.flat:
            return 0.0
        return min(1.0, (i - self.flat) / self.ramp) if self.ramp > 0 else 1.0


def order(g, n, epoch, window):
    """Scene order of one epoch: windows of `window` in index order first, then shuffled."""
    if epoch > 0:
        return g.permutation(n)
    return np.concatenate([s + g.permutation(min(window, n - s)) for s in range(0, n, window)])


def count_correct(model, imgs, labels, bs=250):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(imgs), bs):
            pred = model(to_tensor(imgs[i:i + bs])).argmax(1).numpy()
            correct += int((pred == labels[i:i + bs]).sum())
    model.train()
    return correct


def batch_at(g, perm, i, a, rank, tr_x, tr_cov=None, tr_sub=None):
    """Batch i of an epoch's order: this process's share, turned and flipped (90-degree
    turns and mirror flips keep every class's label; drawn once for the whole batch),
    and the patches' object coverage [B, G, G] turned and flipped the same way."""
    share = a.batch // a.procs
    idx = perm[i * a.batch:(i + 1) * a.batch]
    k, flip = int(g.integers(4)), g.random() < 0.5
    idx = idx[rank * share:(rank + 1) * share]

    def aug(arr):
        arr = np.rot90(arr[idx], k, axes=(1, 2))
        return arr[:, :, ::-1] if flip else arr
    if tr_sub is not None:
        return aug(tr_x), idx, aug(tr_cov), aug(tr_sub)
    return aug(tr_x), idx, (aug(tr_cov) if tr_cov is not None else None)


def train_teacher(a, rank, tr_x, tr_y, va_x, va_y, say):
    """The CNN teacher: --teacher-steps batches drawn from all training scenes."""
    torch.manual_seed(a.seed + 1)
    teacher = Teacher(len(gen_scenes.CLASSES))
    ddp = nn.parallel.DistributedDataParallel(teacher)
    opt = torch.optim.AdamW(teacher.parameters(), lr=2e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=a.teacher_steps,
                                                pct_start=0.05)
    g = np.random.default_rng(a.seed + 1)
    perm = g.permutation(a.train)
    tl = 0.0
    for i in range(a.teacher_steps):
        xb, idx, _ = batch_at(g, perm, i % (a.train // a.batch), a, rank, tr_x)
        loss = F.cross_entropy(ddp(to_tensor(xb))[0], torch.from_numpy(tr_y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        tl += loss.item()
    for b in teacher.buffers():  # BatchNorm statistics: the same teacher in every process
        if b.dtype.is_floating_point:
            dist.all_reduce(b)
            b /= a.procs
    teacher.eval()
    part = slice(rank * len(va_y) // a.procs, (rank + 1) * len(va_y) // a.procs)
    with torch.no_grad():
        pred = teacher(to_tensor(va_x[part]))[0].argmax(1).numpy()
        # scale of the hint: the features' RMS, the same in every process
        rms = teacher(to_tensor(va_x[part][:250]))[1].pow(2).mean()
    c = torch.tensor([float((pred == va_y[part]).sum()), float(rms)])
    dist.all_reduce(c)
    say(f"teacher: {a.teacher_steps} steps, loss {tl / a.teacher_steps:.4f}, val acc "
        f"{100 * c[0].item() / len(va_y):.2f}%")
    return teacher, (c[1].item() / a.procs) ** 0.5


def worker(rank, a, data, port, t0):
    """One of a.procs training processes, one thread each; rank 0 logs and saves."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.procs)
    tr_x, tr_y, tr_cov, tr_sub, va_x, va_y = data
    log = open(os.path.join(a.out, "train_log.txt"), "a") if rank == 0 else None

    def say(msg):
        if rank == 0:
            print(msg, flush=True)
            log.write(msg + "\n")
            log.flush()

    teacher, hint_scale = (train_teacher(a, rank, tr_x, tr_y, va_x, va_y, say)
                           if a.hint > 0 or a.distill > 0 else (None, 1.0))
    torch.manual_seed(a.seed)  # the same initial weights in every process
    S = gen_scenes.SIZE
    model = ViT(S, PATCH, a.dim, a.depth, a.heads, a.mlp, len(gen_scenes.CLASSES))
    if a.init == "mimetic":
        init_mimetic_(model, a.seed)
    if a.patch_init != "default":
        init_patch_embed_(model, tr_x[-2048:], a.patch_init)
    C = len(gen_scenes.CLASSES)
    student = Student(model, C)
    ddp = nn.parallel.DistributedDataParallel(
        student, find_unused_parameters=min(a.hint, a.tokens, a.shape) == 0)
    opt = torch.optim.AdamW(student.parameters(), lr=a.lr, weight_decay=a.wd)
    per_epoch = a.train // a.batch
    steps = a.epochs * per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, a.lr, total_steps=steps, pct_start=a.warmup,
                                                anneal_strategy="cos")
    g = np.random.default_rng(a.seed)  # the same stream in every process: same batches
    va_part = slice(rank * len(va_y) // a.procs, (rank + 1) * len(va_y) // a.procs)
    say(f"model: {sum(p.numel() for p in model.parameters())} parameters; {steps} steps of "
        f"{a.batch} ({a.procs} processes x {a.batch // a.procs})")
    for ep in range(a.epochs):
        perm = order(g, a.train, ep, a.window)
        tl = th = tt = ts = 0.0
        for i in range(per_epoch):
            xb, idx, cov, sub = batch_at(g, perm, i, a, rank, tr_x, tr_cov, tr_sub)
            x = to_tensor(xb)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
                logits, pred, tok, shp = ddp(x)
            logits, pred, tok, shp = logits.float(), pred.float(), tok.float(), shp.float()
            y = torch.from_numpy(tr_y[idx])
            hint = tl_loss = torch.zeros(())
            kd = torch.zeros(())
            if teacher is not None:
                with torch.no_grad():
                    t_logits, t_feat = teacher(x)
                if a.hint > 0:  # the hint: the teacher's features at each patch
                    hint = F.mse_loss(pred, t_feat.flatten(2).transpose(1, 2) / hint_scale)
                if a.distill > 0:  # soft distillation (Hinton et al. 2015), temperature a.kd_t
                    kd = F.kl_div((logits / a.kd_t).log_softmax(-1),
                                  (t_logits / a.kd_t).log_softmax(-1), log_target=True,
                                  reduction="batchmean") * a.kd_t ** 2
            if a.tokens > 0:  # token labels: the scene's class, weighted by coverage
                f = torch.from_numpy(np.ascontiguousarray(cov)).flatten(1).float() / 255
                target = torch.zeros(tok.shape)
                target.scatter_(2, y[:, None, None].expand(-1, f.shape[1], 1), f[..., None])
                target[..., C] = 1 - f
                tl_loss = -(target * tok.log_softmax(-1)).sum(-1).mean()
            ce = F.cross_entropy(logits, y, label_smoothing=a.smoothing)
            sh = torch.zeros(())
            if a.shape > 0:  # each patch's object mask, in SUB x SUB px cells
                n, S2 = sub.shape[0], sub.shape[1]
                G, c = S2 * SUB // PATCH, PATCH // SUB
                m = torch.from_numpy(np.ascontiguousarray(sub)).float().div(255)
                m = m.reshape(n, G, c, G, c).permute(0, 1, 3, 2, 4).reshape(n, G * G, c * c)
                sh = F.binary_cross_entropy_with_logits(shp, m)
            loss = ce + a.hint * hint + a.tokens * tl_loss + a.distill * kd + a.shape * sh
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(student.parameters(), 1.0)
            opt.step()
            sched.step()
            tl += ce.item()
            th += hint.item()
            tt += tl_loss.item()
            ts += sh.item()
            if a.val_every and (i + 1) % a.val_every == 0 and i + 1 < per_epoch:
                c = torch.tensor([count_correct(model, va_x[va_part], va_y[va_part])])
                dist.all_reduce(c)
                say(f"  epoch {ep + 1} step {i + 1}/{per_epoch} val acc "
                    f"{100 * c.item() / len(va_y):.2f}% ({time.time() - t0:.0f} s)")
            if rank == 0 and a.log_every and (i + 1) % a.log_every == 0:
                say(f"  epoch {ep + 1} step {i + 1}/{per_epoch} loss {tl / (i + 1):.4f} "
                    f"hint {th / (i + 1):.4f} tokens {tt / (i + 1):.4f} shape {ts / (i + 1):.4f} ({time.time() - t0:.0f} s)")
        c = torch.tensor([count_correct(model, va_x[va_part], va_y[va_part])])
        dist.all_reduce(c)
        say(f"epoch {ep + 1}/{a.epochs} loss {tl / per_epoch:.4f} val acc "
            f"{100 * c.item() / len(va_y):.2f}% ({time.time() - t0:.0f} s)")
    if rank == 0:
        meta = {"format": "pt", "source": "vitlens tools/train_default.py", "seed": str(a.seed)}
        save_safetensors(os.path.join(a.out, "model.safetensors"), model.state_dict(), meta)
    dist.barrier()
    dist.destroy_process_group()


def coverage(masks, cell=PATCH):
    """Object masks bool [n, S, S] -> the object coverage of each cell x cell px square
    (by default each patch), uint8 [n, S / cell, S / cell] (0-255)."""
    n, S, _ = masks.shape
    G = S // cell
    out = np.empty((n, G, G), np.uint8)
    for s in range(0, n, 4096):
        m = masks[s:s + 4096].reshape(-1, G, cell, G, cell).mean((2, 4), dtype=np.float32)
        out[s:s + 4096] = np.rint(m * 255)
    return out


def keep_freed_memory():
    """glibc hands every block above the mmap threshold back to the kernel when it is
    freed, so each step's [B, H, T, T] attention tensors (~10 MB) arrive as fresh
    zeroed pages: page faults took about 40% of a training step. Raise the mmap
    threshold to its maximum (32 MB) and never trim the heap (mallopt(3))."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))


def main():
    keep_freed_memory()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="assets/default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=128000, help="training scenes (split 'train')")
    ap.add_argument("--flat", type=int, default=2000, help="plain scenes first (level 0)")
    ap.add_argument("--ramp", type=int, default=8000, help="then the clutter ramp to level 1")
    ap.add_argument("--window", type=int, default=4096, help="first-epoch shuffle window")
    ap.add_argument("--val", type=int, default=2000, help="validation scenes (split 'val')")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--warmup", type=float, default=0.03, help="fraction of the steps")
    ap.add_argument("--smoothing", type=float, default=0.05, help="label smoothing")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--mlp", type=int, default=256, help="MLP width")
    ap.add_argument("--hint", type=float, default=0.0,
                    help="weight of the CNN teacher's hint loss (0: no teacher)")
    ap.add_argument("--distill", type=float, default=0.0,
                    help="weight of soft distillation from the CNN teacher's logits (0: none)")
    ap.add_argument("--kd-t", type=float, default=2.0, help="distillation temperature")
    ap.add_argument("--shape", type=float, default=1.0,
                    help="weight of the per-patch object-mask loss (0: none)")
    ap.add_argument("--tokens", type=float, default=1.0,
                    help="weight of the token-label loss (0: none)")
    ap.add_argument("--teacher-steps", type=int, default=600, help="teacher training batches")
    ap.add_argument("--init", choices=("mimetic", "timm"), default="mimetic",
                    help="initial attention weights (timm: truncated normal, std 0.02)")
    ap.add_argument("--patch-init", choices=("default", "whiten", "dct"), default="dct",
                    help="initial patch embedding (default: PyTorch's Conv2d init)")
    ap.add_argument("--bf16", type=int, default=1,
                    help="1: matrix products in bfloat16 (torch.autocast; the weights stay "
                         "float32), 2-3x faster on CPUs with AVX512-BF16")
    ap.add_argument("--procs", type=int, default=2, help="training processes, one thread each")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--val-every", type=int, default=0, help="also check val accuracy every N steps")
    ap.add_argument("--port", type=int, default=29517, help="local port for the processes")
    ap.add_argument("--no-eval", action="store_true", help="skip tools/eval_default.py")
    a = ap.parse_args()
    assert a.batch % a.procs == 0
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "train_log.txt"), "w").close()

    t0 = time.time()
    tr = gen_scenes.batch_parallel(a.seed, "train", 0, a.train, Level(a.flat, a.ramp),
                                   jobs=a.procs)
    va = gen_scenes.batch_parallel(a.seed, "val", 0, a.val, jobs=a.procs)
    t_data = time.time() - t0
    with open(os.path.join(a.out, "train_log.txt"), "a") as log:
        msg = (f"{' '.join(sys.argv)}\ngenerated {a.train} train + {a.val} val scenes in "
               f"{t_data:.0f} s")
        print(msg, flush=True)
        log.write(msg + "\n")
    # fork: the processes share the scenes copy-on-write (torch has run nothing yet)
    cov = coverage(tr[2])
    sub = coverage(tr[2], SUB) if a.shape > 0 else None
    mp.start_processes(worker, args=(a, (tr[0], tr[1], cov, sub, va[0], va[1]), a.port, t0),
                       nprocs=a.procs, start_method="fork")
    t_total = time.time() - t0

    S = gen_scenes.SIZE
    n_params = sum(p.numel() for p in ViT(S, PATCH, a.dim, a.depth, a.heads, a.mlp,
                                          len(gen_scenes.CLASSES)).parameters())
    cfg = {
        "architecture": f"vit_vitlens_shapes_patch{PATCH}_{S}",
        "num_heads": a.heads,
        "num_classes": len(gen_scenes.CLASSES),
        "label_names": gen_scenes.CLASSES,
        "pretrained_cfg": {"input_size": [3, S, S], "crop_pct": 1.0, "interpolation": "bicubic",
                           "mean": list(MEAN), "std": list(STD)},
        "vitlens": {
            "seed": a.seed, "patch": PATCH, "dim": a.dim, "depth": a.depth, "mlp": a.mlp,
            "params": n_params, "train_scenes": a.train, "val_scenes": a.val,
            "train_seconds": round(t_total), "data_seconds": round(t_data),
            "threads": a.procs,
            "machine": f"{os.cpu_count()} cores ({platform.machine()}, PyTorch {torch.__version__})",
            "command_note": "Defaults: " + ", ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items()
                if k not in ("out", "no_eval", "log_every", "val_every", "port")) + ".",
            "recipe": (
                f"AdamW (lr {a.lr}, weight decay {a.wd}), batch {a.batch}, {a.epochs} epochs of "
                f"{a.train} scenes, one-cycle schedule ({a.warmup:.0%} warm-up, cosine), "
                f"label smoothing {a.smoothing}, gradient clipping at norm 1. Augmentation: "
                f"90° turns and mirror flips (every class is symmetric under them). Curriculum: "
                f"training scenes 0–{a.flat - 1} are plain (clutter level 0: one flat "
                f"background colour, no blotches, strokes or grain, objects of radius "
                f"{(gen_scenes.R_MIN + gen_scenes.R_MAX) / 2:g}–{gen_scenes.R_MAX} px), the "
                f"level then rises linearly to 1 over the next {a.ramp}, the rest are full "
                f"scenes; the first epoch reads the scenes in index order, shuffled within "
                f"windows of {a.window}, the other epochs are shuffled. Initialisation: mimetic "
                f"(Trockman & Kolter 2023: W_q W_k^T ~ 0.7 Z + 0.7 I per head, W_v W_proj ~ "
                f"0.4 Z - 0.4 I, 2-D sin-cos position embedding, all trained). "
                + (f"Hint (FitNets, "
                f"Romero et al. 2015): a small CNN teacher (4 convolutions, BatchNorm, max "
                f"pooling, stride 8; trained first for {a.teacher_steps} batches on the training "
                f"scenes, labels only; not shipped) gives a 64-vector per 8 px patch; the ViT's "
                f"patch tokens after block {a.depth - 1} of {a.depth}, through a linear map "
                f"dropped after training, regress it (MSE, weight {a.hint}) next to the "
                f"cross-entropy. " if a.hint > 0 else "") +
                f"Token labels (Jiang et al. 2021), weight {a.tokens}: the final "
                f"patch tokens, through another linear map dropped after training, predict the "
                f"scene's class in proportion to the patch's object coverage and 'background' "
                f"for the rest (soft cross-entropy). " +
                (f"Object-mask targets, weight {a.shape}: the patch tokens after block "
                 f"{a.depth - 1} of {a.depth}, through a third linear map dropped after "
                 f"training, predict the object's coverage of each {SUB}×{SUB} px cell of "
                 f"their patch (binary cross-entropy). " if a.shape > 0 else "") +
                f"These are the only uses of the object masks in "
                f"training. The attention (the CLS token's included) is never supervised. "
                f"Patch embedding initialised as {a.patch_init}"
                f"{' (2-D DCT-II basis patches on random colour mixes)' if a.patch_init == 'dct' else ''}. "
                f"{a.procs} processes of one thread average their gradients "
                f"(DistributedDataParallel)" +
                (", matrix products in bfloat16 (torch.autocast; weights, optimizer "
                 "and losses in float32)." if a.bf16 else ".")),
        },
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(a.out, "train_log.txt"), "a") as log:
        msg = f"done in {t_total:.0f} s ({t_data:.0f} s generating scenes)"
        print(msg, flush=True)
        log.write(msg + "\n")
    if not a.no_eval:
        import eval_default
        sys.argv = [sys.argv[0], "--dir", a.out]
        eval_default.main()


if __name__ == "__main__":
    main()
