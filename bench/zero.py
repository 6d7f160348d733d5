"""Chapter 07's targets, measured: memory estimator vs measured RSS, ZeRO-1 vs plain data parallel on 2 CPU ranks,
gradient accumulation vs the equivalent large batch.

  1. estimate_memory(backend='cpu') ÷ measured peak RSS growth of a fresh training process (fp32, GRAPH mode), on
     configurations other than the two 16-token runs CPU_RUNTIME was measured with; target ±15 %. The device formula
     (memory reused, what GPU/Ascend runs get) is shown beside it: the CPU keeps every intermediate.
  2. train_llm under msrun, 2 ranks, tiny model, STEPS steps (first WARM excluded), plain DP (the baseline) vs
     --zero 1: median step time, per-rank optimizer bytes, and whether the final parameters are bitwise equal.
  3. One process, 8 × 256 tokens per optimizer step: one batch of 8 (the baseline) vs accum_steps 2 and 4:
     tokens/s and peak RSS growth.

    python bench/zero.py      # prints the tables and writes bench/results/zero.md
"""
import json, os, statistics, subprocess, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _report import write_result  # noqa: E402
import msllm_nb.model.llama as msm  # noqa: E402
import msllm_nb.train_llm as tl  # noqa: E402
import msllm_nb.train.zero as z  # noqa: E402

STEPS, WARM = 20, 4
BIN = Path(sys.executable).parent


def dp_run(out, tokens, extra=()):
    a = [tl.__file__, '--config', 'tiny', '--out', str(out), '--set', f'token_dir={tokens}', f'steps={STEPS}', 'batch_size=4',
         'warmup_steps=2', 'val_every=1000', 'save_every=1000', 'progress=false', 'sample_prompts=[]', *extra]
    env = {**os.environ, 'GLOG_v': '3', 'PATH': f"{BIN}:{os.environ.get('PATH', '')}"}
    subprocess.run([str(BIN / 'msrun'), '--worker_num=2', '--local_worker_num=2', f'--master_port={tl.free_port()}',
                    f'--log_dir={out}/logs', '--join=True', *a], check=True, capture_output=True, env=env)
    ranks = [json.loads((out / 'ranks' / f'rank_{r}.json').read_text()) for r in range(2)]
    return {'step_s': statistics.median(r['step_s'] for r in tl.read_metrics(out, 'train')[WARM:]),
            'opt_mb': sum(ranks[0]['optimizer_bytes'].values()) / 1e6, 'moments_mb': ranks[0]['optimizer_bytes']['adam_moments'] / 1e6,
            'digest': ranks[0]['params_sha256']}


def main():
    tiny = msm.PRESETS['tiny']
    wide = msm.LlamaConfig(hidden_size=512, intermediate_size=1376, num_attention_heads=8, num_key_value_heads=8)
    deep = msm.LlamaConfig(hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=6, vocab_size=8192)
    rows = ['| config | params | CPU estimate MB | measured MB | CPU estimate ÷ measured | within ±15 % | device formula ÷ measured |',
            '|---|---|---|---|---|---|---|']
    for name, c, b, s in [('tiny 2×256', tiny, 2, 256), ('tiny 8×256', tiny, 8, 256), ('tiny 8×128', tiny, 8, 128), ('wide 4×256', wide, 4, 256),
                          ('6 layers × 384, vocab 8192, 4×192', deep, 4, 192)]:
        m = z.measure_train_memory(c, s, b)['delta_bytes']
        e, d = z.estimate_memory(c, s, b, 'fp32', backend='cpu')['total'], z.estimate_memory(c, s, b, 'fp32')['total']
        rows.append(f'| {name} | {msm.param_count(c) / 1e6:.1f} M | {e / 1e6:.0f} | {m / 1e6:.0f} | {e / m:.2f} | {"yes" if abs(e / m - 1) <= 0.15 else "no"} | {d / m:.2f} |')
    mem = '\n'.join(rows)

    tokens = tl.sample_tokens()
    with tempfile.TemporaryDirectory() as tmp:
        dp, zr = dp_run(Path(tmp) / 'dp', tokens), dp_run(Path(tmp) / 'zero', tokens, ['zero=1'])
    zero = '\n'.join(['| 2 ranks × 4 rows × 256 | step (s) | ratio | optimizer MB per rank | Adam moments MB per rank | parameters |',
                      '|---|---|---|---|---|---|',
                      f'| plain DP (baseline) | {dp["step_s"]:.3f} | 1.00 | {dp["opt_mb"]:.1f} | {dp["moments_mb"]:.1f} | |',
                      f'| ZeRO-1 | {zr["step_s"]:.3f} | {zr["step_s"] / dp["step_s"]:.2f} | {zr["opt_mb"]:.1f} ({zr["opt_mb"] / dp["opt_mb"]:.2f}×) | '
                      f'{zr["moments_mb"]:.1f} ({zr["moments_mb"] / dp["moments_mb"]:.2f}×) | {"bitwise equal" if zr["digest"] == dp["digest"] else "DIFFERENT"} |'])

    rows = ['| 8 × 256 tokens per step | micro-batch | tokens/s | ratio | peak RSS growth MB | ratio |', '|---|---|---|---|---|---|']
    base = None
    for accum in (1, 2, 4):
        m = z.measure_train_memory(tiny, 256, 8, accum=accum)
        tps = 8 * 256 / m['step_s']
        base = base or (tps, m['delta_bytes'])
        rows.append(f'| {"one batch (baseline)" if accum == 1 else f"accum_steps {accum}"} | {8 // accum} | {tps:.0f} | {tps / base[0]:.2f} | '
                    f'{m["delta_bytes"] / 1e6:.0f} | {m["delta_bytes"] / base[1]:.2f} |')
    acc = '\n'.join(rows)
    write_result('zero', 'Chapter 07: memory estimator, ZeRO-1, gradient accumulation (CPU, fp32)',
                 f'## Estimator (backend cpu) vs measured peak RSS growth (target ±15 %)\n\n{mem}\n\n'
                 f'## ZeRO-1 vs plain data parallel, msrun 2 ranks, tiny model, median of steps {WARM + 1}–{STEPS}\n\n{zero}\n\n'
                 f'## Gradient accumulation vs the large batch (one process, tiny model, min of 2 timed steps)\n\n{acc}')


if __name__ == '__main__':
    main()
