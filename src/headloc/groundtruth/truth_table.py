"""A planted model's truth as Markdown (truth.md beside truth.json): per task, the planted heads'
single-ablation effects, its certificate and its interactions' checks."""

from __future__ import annotations


def summary_table(truth: dict) -> str:
    """Markdown: per task, the planted heads' single-ablation accuracy changes and the strongest other head."""
    lines = ["| task | baseline | planted head (role, share): delta acc | planted set | pair alone / both | "
             "strongest unplanted | weak planted | strong unplanted |", "|---|---|---|---|---|---|---|---|"]
    for task, e in truth["tasks"].items():
        heads = ", ".join(f"{h} ({p['role']}, {p['expected_share']:g}): {p['delta']:+.3f}" for h, p in e["planted"].items())
        pair = "-"
        if "pair" in e:
            pair = " ".join(f"{d:+.3f}" for d in e["pair"]["alone_delta"].values()) + f" / {e['pair']['both_delta']:+.3f}"
        s = e["strongest_unplanted"]
        lines.append(f"| {task} | {e['baseline']['acc']:.3f} | {heads} | {e['planted_set']['delta']:+.3f} | {pair} | "
                     f"{s['head']}: {s['delta']:+.3f} | {', '.join(e['planted_but_weak']) or '-'} | "
                     f"{', '.join(e['unplanted_but_strong']) or '-'} |")
    certified = {task: e["certificate"] for task, e in truth["tasks"].items() if "certificate" in e}
    if certified:
        lines += ["", f"Certificate (gold log-probability, first {next(iter(truth['tasks'].values()))['documents']} "
                  f"documents; {next(iter(certified.values()))['rule']}):", "",
                  "| task | beta_min (weakest) | largest unplanted | tau | beta/largest | beta/tau | passes |",
                  "|---|---|---|---|---|---|---|"]
        for task, c in certified.items():
            lines.append(f"| {task} | {c['beta_min']:.4f} ({c['weakest']}) | {c['largest_unplanted']:+.5f} "
                         f"({c['largest_unplanted_head']}) | {c['tau']:.6f} | {c['beta_over_largest']} | "
                         f"{c['beta_over_tau']} | {'yes' if c['passes'] else '**no**'} |")
    return "\n".join(lines + interactions_table(truth))


def interactions_table(truth: dict) -> list[str]:
    """Markdown lines: each interaction's effects (gold log-probability deltas) and its certificate's checks."""
    found = [(task, i) for task, e in truth["tasks"].items() for i in e.get("interactions", [])]
    if not found:
        return []
    lines = ["", "Interactions (gold log-probability changes; checks are drops, with their ratios to the largest "
             "unplanted effect and to tau):", "",
             "| task | kind | heads (first, second) | alone | both | tau | largest unplanted | checks | passes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for task, i in found:
        alone = ", ".join(f"{d:+.5f}" for d in i["alone"].values())
        checks = "; ".join(f"{c['what']} {c['effect']:.5f} " + (f"({c['over_largest']} x, {c['over_tau']} x tau)"
                                                                if "over_tau" in c else "(< tau)" if c["holds"] else
                                                                "(not < tau)") for c in i["checks"])
        lines.append(f"| {task} | {i['kind']} | {', '.join(i['heads'])} | {alone} | {i['both']:+.5f} | "
                     f"{i['tau']:.6f} | {i['largest_unplanted']:+.5f} | {checks} | {'yes' if i['passes'] else '**no**'} |")
    return lines
