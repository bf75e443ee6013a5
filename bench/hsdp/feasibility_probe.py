"""Feasibility probe: FSDP2 hybrid sharding (HSDP) with a custom replicate-dim all-reduce, CPU + Gloo.

    /work/main/.venv-torch2/bin/python bench/hsdp/feasibility_probe.py [--steps 3]

Spawns 4 ranks (torch.multiprocessing, Gloo, file:// rendezvous), mesh 2 x 2 with
mesh_dim_names ("replicate", "shard"): rank r has replicate index r // 2 and shard index r % 2,
replica groups (same shard index) {0,2} and {1,3}, shard groups {0,1} and {2,3}.

Scenarios (a fresh model each, same init on every rank, per-rank data):
  A  hsdp_default      2-D mesh fully_shard (native HSDP: reduce-scatter over "shard", then
                       all-reduce over "replicate"); first without, then (if that raises) with
                       set_force_sum_reduction_for_comms(True).
  B  hsdp_no_allreduce 2-D mesh + set_requires_all_reduce(False): where do the gradients go?
  C  hsdp_hook_observe 2-D mesh + set_all_reduce_hook: what the hook sees (runs AFTER the native AR).
  D  custom_rs_observe 2-D mesh + set_custom_reduce_scatter: what a custom ReduceScatter sees.
  E  fsdp1d_hook       the proposed design: fully_shard on the 1-D sub-mesh mesh["shard"] and
                       set_all_reduce_hook(hook) on every FSDP module; the hook calls
                       sparse_allreduce(flat_shard, mesh.get_group("replicate")) (here: dense, as a
                       stand-in for exdyna) and writes the average back in place.
  F  dcp               torch.distributed.checkpoint save/load of the HSDP model (A) and of E.

Identity check (PASS/FAIL line): after the steps, E's parameters are bit-identical inside each
replica group, equal A's (native HSDP) to float tolerance, and equal a single-process reference.
Exit code 0 whenever the probe itself ran (a FAIL is reported, not raised), 1 if a rank crashed.
"""

import argparse
import os
import sys
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

WORLD = 4
R, S = 2, 2  # replicate x shard
IN, HID, OUT, BATCH = 7, 5, 3, 4  # odd sizes: dim-0 padding shows up (5 -> 6, 3 -> 4 rows)
LR = 0.1


def log(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HID), nn.ReLU(), nn.Linear(HID, OUT))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 + 10 * step + rank)
    return torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def make_optim(params):
    return torch.optim.SGD(params, lr=LR, momentum=0.9)


def reference_params(steps):
    """Single-process reference: average of the 4 ranks' gradients, same optimizer."""
    m = make_model()
    opt = make_optim(m.parameters())
    for step in range(steps):
        opt.zero_grad()
        loss = sum(loss_fn(m, *batch(r, step)) for r in range(WORLD)) / WORLD
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in m.parameters()]


def per_rank_grads(step):
    """Unsharded gradients of every rank's local loss at the initial parameters (step 0 only)."""
    out = []
    for r in range(WORLD):
        m = make_model()
        loss_fn(m, *batch(r, step)).backward()
        out.append([p.grad.clone() for p in m.parameters()])
    return out


def expected_flat(grads_per_param, shard_idx):
    """FSDP2's reduce-scatter output layout for one param group: each param's grad padded on
    dim 0 to a multiple of S, chunk shard_idx, flattened, concatenated in param order."""
    parts = []
    for g in grads_per_param:
        rows = -(-g.shape[0] // S) * S
        padded = torch.zeros((rows,) + tuple(g.shape[1:]), dtype=g.dtype)
        padded[: g.shape[0]] = g
        parts.append(padded.chunk(S, dim=0)[shard_idx].reshape(-1))
    return torch.cat(parts)


def wrap(model, mesh):
    from torch.distributed.fsdp import fully_shard

    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def full_params(model):
    return [p.full_tensor().detach().clone() for p in model.parameters()]


def describe_grads(model):
    lines = []
    for name, p in model.named_parameters():
        g = p.grad
        if g is None:
            lines.append(f"{name}: grad None")
        else:
            lines.append(
                f"{name}: param {type(p).__name__} global {tuple(p.shape)}; grad {type(g).__name__} "
                f"to_local {tuple(g.to_local().shape)} placements {g.placements} "
                f"mesh_dims {g.device_mesh.mesh_dim_names}"
            )
    return lines


def train(model, steps, rank, before_step=None, force_sum=False, after_backward=None):
    from torch.distributed.fsdp import FSDPModule

    if force_sum:
        for m in model.modules():
            if isinstance(m, FSDPModule):
                m.set_force_sum_reduction_for_comms(True)
    opt = make_optim(model.parameters())
    for step in range(steps):
        opt.zero_grad()
        loss_fn(model, *batch(rank, step)).backward()
        if after_backward is not None:
            after_backward(step)
        if before_step is not None:
            before_step(step)
        opt.step()
    return model


def sparse_allreduce(flat, group):
    """Stand-in for exdyna: returns the average over `group` of `flat` (here dense).
    The exdyna version keeps its residual keyed by the FSDP unit, sparsifies, exchanges, and
    returns the averaged sparse update of the same shape."""
    out = flat.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    out.div_(group.size())
    return out


def worker(rank, init_file, ckpt_dir, steps, results_q):
    torch.set_num_threads(1)
    ok = True
    res = {}
    try:
        dist.init_process_group(
            "gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD
        )
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter

        log(rank, f"torch {torch.__version__}, gloo, world {dist.get_world_size()}")
        mesh = init_device_mesh("cpu", (R, S), mesh_dim_names=("replicate", "shard"))
        rep_group = mesh.get_group("replicate")
        shard_group = mesh.get_group("shard")
        rep_idx, shard_idx = mesh.get_coordinate()
        log(
            rank,
            f"mesh {mesh}; coordinate (replicate={rep_idx}, shard={shard_idx}); "
            f"replicate group ranks {dist.get_process_group_ranks(rep_group)}, "
            f"shard group ranks {dist.get_process_group_ranks(shard_group)}",
        )
        ref = reference_params(steps)
        g0 = per_rank_grads(0)  # g0[r][param_idx]

        # ---- A: native HSDP
        force_sum = False
        try:
            a = train(wrap(make_model(), mesh), steps, rank)
            res["A_error"] = None
        except Exception as e:  # noqa: BLE001 (identical on all ranks)
            res["A_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
            log(rank, f"A hsdp_default without force-sum FAILED: {res['A_error']}")
            force_sum = True
            dist.barrier()
            a = None
        if a is None:
            a = train(wrap(make_model(), mesh), steps, rank, force_sum=True)
        log(rank, f"A hsdp_default ran (force_sum_reduction_for_comms={force_sum})")
        for line in describe_grads(a):
            log(rank, "A grad " + line)
        a_params = full_params(a)
        a_err = max((x - y).abs().max().item() for x, y in zip(a_params, ref))
        log(rank, f"A max|HSDP - single-process reference| = {a_err:.3e}")
        res["A_ref_err"] = a_err

        # What A's sharded grads hold after one backward: check against the global average.
        a1 = wrap(make_model(), mesh)
        if force_sum:
            for m in a1.modules():
                if isinstance(m, FSDPModule):
                    m.set_force_sum_reduction_for_comms(True)
        loss_fn(a1, *batch(rank, 0)).backward()
        for i, p in enumerate(a1.parameters()):
            avg = sum(g0[r][i] for r in range(WORLD)) / WORLD
            local = p.grad.to_local()
            exp = expected_flat([avg], shard_idx)[: local.numel()].view(local.shape)
            log(
                rank,
                f"A after backward, param {i}: grad.to_local == chunk {shard_idx} of the average "
                f"over all 4 ranks: {torch.allclose(local, exp, atol=1e-6)}",
            )

        # ---- B: set_requires_all_reduce(False)
        b = wrap(make_model(), mesh)
        if force_sum:
            b.set_force_sum_reduction_for_comms(True)
        b.set_requires_all_reduce(False)  # recurse=True
        loss_fn(b, *batch(rank, 0)).backward()
        grads_none = [p.grad is None for p in b.parameters()]
        partial = [
            None if grp._partial_reduce_output is None else tuple(grp._partial_reduce_output.shape)
            for m in b.modules()
            if isinstance(m, FSDPModule)
            for grp in m._get_fsdp_state()._fsdp_param_groups
        ]
        log(
            rank,
            f"B set_requires_all_reduce(False): param.grad is None per param: {grads_none}; "
            f"private FSDPParamGroup._partial_reduce_output shapes per module: {partial}",
        )
        res["B_grads_none"] = all(grads_none)

        # ---- C: set_all_reduce_hook on native HSDP (observe)
        c = wrap(make_model(), mesh)
        if force_sum:
            for m in c.modules():
                if isinstance(m, FSDPModule):
                    m.set_force_sum_reduction_for_comms(True)
        seen_c = {}

        def make_obs(name, idxs):
            def hook(t):
                grads = [g for i, g in enumerate(g0[0]) if i in idxs]
                per_rank = [
                    expected_flat([g0[r][i] for i in idxs], shard_idx) for r in range(WORLD)
                ]
                shard_peers = [r for r in range(WORLD) if r // S == rep_idx]
                seen_c[name] = dict(
                    shape=tuple(t.shape),
                    dtype=t.dtype,
                    eq_global_sum=torch.allclose(t, sum(per_rank), atol=1e-5),
                    eq_global_avg=torch.allclose(t, sum(per_rank) / WORLD, atol=1e-6),
                    eq_shardgroup_sum=torch.allclose(
                        t, sum(per_rank[r] for r in shard_peers), atol=1e-5
                    ),
                    eq_shardgroup_avg=torch.allclose(
                        t, sum(per_rank[r] for r in shard_peers) / S, atol=1e-6
                    ),
                )
                del grads

            return hook

        c[0].set_all_reduce_hook(make_obs("0", [0, 1]))
        c[2].set_all_reduce_hook(make_obs("2", [2, 3]))
        loss_fn(c, *batch(rank, 0)).backward()
        for k, v in sorted(seen_c.items()):
            log(rank, f"C HSDP all_reduce_hook on module {k}: {v}")

        # ---- D: custom ReduceScatter (observe)
        seen_d = []

        class ObservingReduceScatter(ReduceScatter):
            def allocate(self, size, *, dtype, device):
                return torch.empty(*size, dtype=dtype, device=device)

            def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
                seen_d.append(
                    dict(
                        out=tuple(output_tensor.shape),
                        inp=tuple(input_tensor.shape),
                        dtype=input_tensor.dtype,
                        group=dist.get_process_group_ranks(group),
                        op=str(op),
                    )
                )
                return dist.reduce_scatter_tensor(
                    output_tensor, input_tensor, op=op, group=group, async_op=async_op
                )

        d = wrap(make_model(), mesh)
        for m in d.modules():
            if isinstance(m, FSDPModule):
                if force_sum:
                    m.set_force_sum_reduction_for_comms(True)
                m.set_custom_reduce_scatter(ObservingReduceScatter())
        try:
            loss_fn(d, *batch(rank, 0)).backward()
            log(rank, f"D custom ReduceScatter calls: {seen_d}")
        except Exception as e:  # noqa: BLE001
            log(rank, f"D custom ReduceScatter FAILED: {type(e).__name__}: {e}")

        # ---- E: proposed design: 1-D FSDP over "shard" + all_reduce_hook over "replicate"
        seen_e = {}

        def make_hook(name, idxs):
            def hook(flat):
                if name not in seen_e:  # first call = step 0
                    per_rank = [
                        expected_flat([g0[r][i] for i in idxs], shard_idx) for r in range(WORLD)
                    ]
                    shard_peers = [r for r in range(WORLD) if r // S == rep_idx]
                    seen_e[name] = dict(
                        shape=tuple(flat.shape),
                        dtype=flat.dtype,
                        contiguous=flat.is_contiguous(),
                        eq_shardgroup_sum=torch.allclose(
                            flat, sum(per_rank[r] for r in shard_peers), atol=1e-5
                        ),
                        eq_shardgroup_avg=torch.allclose(
                            flat, sum(per_rank[r] for r in shard_peers) / S, atol=1e-6
                        ),
                    )
                update = sparse_allreduce(flat, rep_group)
                flat.copy_(update)  # in place: FSDP views param.grad into this buffer

            return hook

        e = wrap(make_model(), mesh["shard"])
        e[0].set_all_reduce_hook(make_hook("0", [0, 1]))
        e[2].set_all_reduce_hook(make_hook("2", [2, 3]))
        if force_sum:
            # SUM comms + post-divide by the shard size (after the hook); the hook averages over R
            for m in e.modules():
                if isinstance(m, FSDPModule):
                    m.set_force_sum_reduction_for_comms(True)
        try:
            train(e, steps, rank)
            res["E_error"] = None
        except Exception as ex:  # noqa: BLE001
            res["E_error"] = f"{type(ex).__name__}: {ex}".splitlines()[0]
            log(rank, f"E FAILED: {res['E_error']}")
            raise
        for k, v in sorted(seen_e.items()):
            log(rank, f"E 1-D FSDP all_reduce_hook on module {k} (step 0): {v}")
        for line in describe_grads(e):
            log(rank, "E grad " + line)

        e_params = full_params(e)
        e_vs_a = max((x - y).abs().max().item() for x, y in zip(e_params, a_params))
        e_vs_ref = max((x - y).abs().max().item() for x, y in zip(e_params, ref))
        # bit identity of local shards inside the replica group
        bit_same = True
        for p in e.parameters():
            loc = p.detach().to_local().contiguous()
            gathered = [torch.empty_like(loc) for _ in range(R)]
            dist.all_gather(gathered, loc, group=rep_group)
            bit_same &= all(torch.equal(gathered[0], t) for t in gathered)
        log(
            rank,
            f"E max|E - native HSDP| = {e_vs_a:.3e}, max|E - reference| = {e_vs_ref:.3e}, "
            f"replica-group shards bit-identical: {bit_same}",
        )
        res["E_ok"] = bit_same and e_vs_a < 1e-5 and e_vs_ref < 1e-5

        # ---- E2/E3: divide-factor variants of E (the hook SUMs over "replicate", FSDP divides)
        #   E2: set_force_sum_reduction_for_comms(True) + set_gradient_divide_factor(S * R):
        #       reduce-scatter SUM, hook sees the shard-group SUM, FSDP post-divides by S*R after
        #       the hook.
        #   E3: set_gradient_divide_factor(S * R) alone: reduce-scatter op PREMUL_SUM(1/(S*R)).
        for tag, fsum in (("E2", True), ("E3", False)):
            seen_v = {}

            def make_sum_hook(name, idxs, seen_v=seen_v):
                def hook(flat):
                    if name not in seen_v:
                        per_rank = [
                            expected_flat([g0[r][i] for i in idxs], shard_idx)
                            for r in range(WORLD)
                        ]
                        peers = [r for r in range(WORLD) if r // S == rep_idx]
                        ssum = sum(per_rank[r] for r in peers)
                        seen_v[name] = dict(
                            eq_shardgroup_sum=torch.allclose(flat, ssum, atol=1e-5),
                            eq_shardgroup_sum_over_SR=torch.allclose(
                                flat, ssum / WORLD, atol=1e-6
                            ),
                        )
                    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=rep_group)

                return hook

            v = wrap(make_model(), mesh["shard"])
            v[0].set_all_reduce_hook(make_sum_hook("0", [0, 1]))
            v[2].set_all_reduce_hook(make_sum_hook("2", [2, 3]))
            for m in v.modules():
                if isinstance(m, FSDPModule):
                    m.set_force_sum_reduction_for_comms(fsum)
                    m.set_gradient_divide_factor(float(S * R))
            try:
                train(v, steps, rank)
                v_err = max((x - y).abs().max().item() for x, y in zip(full_params(v), a_params))
                log(
                    rank,
                    f"{tag} (force_sum={fsum}, gradient_divide_factor={S * R}, hook = replicate "
                    f"SUM): hook saw {dict(sorted(seen_v.items()))}; max|{tag} - native HSDP| = "
                    f"{v_err:.3e}",
                )
                res[tag] = f"ran, max|{tag} - native HSDP| = {v_err:.3e}"
            except Exception as ex:  # noqa: BLE001
                res[tag] = f"FAILED: {type(ex).__name__}: {ex}".splitlines()[0]
                log(rank, f"{tag} {res[tag]}")
                dist.barrier()

        # ---- F: distributed checkpoint
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        for tag, mdl, m_mesh in (("A_hsdp", None, mesh), ("E_fsdp1d", e, mesh["shard"])):
            try:
                if mdl is None:
                    mdl = train(wrap(make_model(), m_mesh), 1, rank, force_sum=force_sum)
                opt = make_optim(mdl.parameters())
                loss_fn(mdl, *batch(rank, 9)).backward()
                opt.step()  # creates momentum state
                before = full_params(mdl)
                msd, osd = get_state_dict(mdl, opt)
                path = os.path.join(ckpt_dir, tag)
                dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
                with torch.no_grad():
                    for p in mdl.parameters():
                        p.add_(1.0)
                opt.zero_grad()
                msd2, osd2 = get_state_dict(mdl, opt)
                sd2 = {"model": msd2, "optim": osd2}
                dcp.load(sd2, checkpoint_id=path)
                set_state_dict(
                    mdl, opt, model_state_dict=sd2["model"], optim_state_dict=sd2["optim"]
                )
                after = full_params(mdl)
                same = all(torch.equal(x, y) for x, y in zip(before, after))
                plain = mdl.state_dict()
                k0 = next(iter(plain))
                files = "-"
                if rank == 0:
                    files = sorted((f, os.path.getsize(os.path.join(path, f))) for f in os.listdir(path))
                log(
                    rank,
                    f"F dcp {tag}: save+load round trip exact: {same}; files (name, bytes) {files}; "
                    f"plain state_dict {k0}: {type(plain[k0]).__name__} placements "
                    f"{plain[k0].placements}",
                )
                res[f"F_{tag}"] = same
            except Exception as ex:  # noqa: BLE001
                log(rank, f"F dcp {tag} FAILED: {type(ex).__name__}: {ex}")
                res[f"F_{tag}"] = False

        flag = torch.tensor([1.0 if res["E_ok"] else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        res["E_ok_all"] = bool(flag.item() == 1.0)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        ok = False
        log(rank, "CRASH\n" + traceback.format_exc())
    results_q.put((rank, ok, res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="hsdp_probe_") as tmp:
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        procs = [
            ctx.Process(
                target=worker,
                args=(r, os.path.join(tmp, "init"), os.path.join(tmp, "ckpt"), args.steps, q),
            )
            for r in range(WORLD)
        ]
        for p in procs:
            p.start()
        results = {}
        for _ in procs:
            r, ok, res = q.get()
            results[r] = (ok, res)
        for p in procs:
            p.join(timeout=60)
    crashed = [r for r, (ok, _) in results.items() if not ok]
    r0 = results[0][1]
    print(f"torch {torch.__version__}")
    print(f"native HSDP (A) error without force-sum: {r0.get('A_error')}")
    print(f"set_requires_all_reduce(False) leaves param.grad None: {r0.get('B_grads_none')}")
    print(f"E2 (force-sum + divide factor S*R, hook SUMs): {r0.get('E2')}")
    print(f"E3 (divide factor S*R without force-sum): {r0.get('E3')}")
    print(f"DCP round trip: HSDP {r0.get('F_A_hsdp')}, 1-D FSDP + hook {r0.get('F_E_fsdp1d')}")
    passed = not crashed and all(res.get("E_ok_all") for _, res in results.values())
    print(
        ("PASS" if passed else "FAIL")
        + ": identity check (1-D FSDP over 'shard' + all_reduce_hook doing the replicate all-reduce"
        + " == native HSDP == reference, replicas bit-identical)"
        + (f"; crashed ranks {crashed}" if crashed else "")
    )
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
