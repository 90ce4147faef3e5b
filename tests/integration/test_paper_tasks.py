"""The paper's benchmark tasks (headloc_<dataset>) against lm-eval 0.4.13's built-ins, offline.

Identity: each built-in task that can run offline is pointed at local copies of the same
documents (its YAML loaded with lm-eval's own loader, ``dataset_path: json``), run next to
headloc's task with the tiny random model, and every request (the full prompt with few-shot
examples, continuation or generation arguments), every response and every per-document metric
value must be equal. mbpp and humaneval's built-ins call ``evaluate.load("code_eval")`` (network)
at import, so for them the templates are compared and scoring goes through headloc's sandbox.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")
import lm_eval  # noqa: E402
from lm_eval.evaluator import evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402
from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

from headloc.data.datasets import write_jsonl  # noqa: E402
from headloc.data.paper_data import ARITHMETIC_SUBSETS, PAPER_DATASETS, load_docs, normalize  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TASKS_DIR = REPO / "src" / "headloc" / "tasks"
BUILTIN = Path(lm_eval.__file__).parent / "tasks"
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="offline data mirror not available")
FEWSHOT_SEED = 1234  # lm-eval's simple_evaluate default (fewshot_random_seed)

# task -> (metric key the workflow reads, chat template?)
METRICS = {
    "headloc_gsm8k": ("exact_match,strict-match", False),
    "headloc_arithmetic": ("acc,none", False),
    "headloc_mbpp": ("pass_at_1,none", False),
    "headloc_humaneval": ("pass_at_1,create_test", True),
    "headloc_hellaswag": ("acc_norm,none", False),
    "headloc_boolq": ("acc,none", False),
    "headloc_arc_challenge": ("acc_norm,none", False),
    "headloc_mmlu": ("acc,none", False),
    "headloc_wmdp_bio": ("acc,none", False),
    "headloc_wmdp_chem": ("acc,none", False),
    "headloc_wmdp_cyber": ("acc,none", False),
}


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def tiny_lm(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=4, max_length=2048,
                max_gen_toks=24)


@pytest.fixture
def sandbox():
    """The real sandbox every model-written program runs in."""
    import headloc.data.sandbox

    return headloc.data.sandbox


def jsonl(path: Path, rows) -> str:
    write_jsonl(rows, path)
    return str(path)


def ours(name: str, **dataset_kwargs) -> dict:
    """headloc's task as the workflow builds it: its YAML with dataset_kwargs merged in."""
    config = load_yaml(TASKS_DIR / f"{name}.yaml", resolve_func=True)
    config["dataset_kwargs"] = {**(config.get("dataset_kwargs") or {}), **dataset_kwargs}
    return config


def builtin(relative: str, data_files: dict, **overrides) -> dict:
    """A built-in task's YAML (includes and !function resolved) reading local JSON files."""
    config = load_yaml(BUILTIN / relative, resolve_func=True)
    config.pop("tag", None)
    config.update(dataset_path="json", dataset_name=None,
                  dataset_kwargs={"data_files": data_files}, **overrides)
    return config


def run(lm, configs: list[dict], chat: bool = False) -> list[dict]:
    """Evaluate inline task configs; the samples of all tasks, in task order."""
    loaded = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).load(configs)
    for task in loaded["tasks"].values():
        task.set_fewshot_seed(FEWSHOT_SEED)
    output = evaluate(lm=lm, task_dict=loaded, bootstrap_iters=0, log_samples=True,
                      apply_chat_template=chat, verbosity="WARNING")
    return [s for config in configs for s in output["samples"][config["task"]]]


def assert_identical(mine: list[dict], theirs: list[dict], metrics: list[str]) -> None:
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs):
        assert a["arguments"] == b["arguments"]  # the requests: full prompts and continuations
        assert a["target"] == b["target"]
        assert a["resps"] == b["resps"] and a["filtered_resps"] == b["filtered_resps"]
        for metric in metrics:
            assert a[metric] == b[metric], metric


def mirror_rows(relative: str, n: int | None = None) -> list[dict]:
    path = SHARED_DATA / relative
    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    rows = [json.loads(line) for line in data.decode().split("\n") if line.strip()]
    return rows if n is None else rows[:n]


# --------------------------------------------------------------------------- registry


def test_every_paper_task_loads_offline_from_the_mirror():
    names = sorted(METRICS)
    assert names == sorted(f"headloc_{n}" for n in PAPER_DATASETS)
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                          metadata={"mirror": str(SHARED_DATA), "allow_code_execution": True})
    tasks = manager.load(names)["tasks"]
    counts = {"headloc_arithmetic": 20000, "headloc_mmlu": 14042, "headloc_hellaswag": 10042,
              "headloc_mbpp": 500, "headloc_humaneval": 164}
    for name, task in tasks.items():
        assert task.config.test_split == "test"
        assert [d["id"] for d in task.eval_docs][:2] == [
            d["id"] for d in load_docs(name.removeprefix("headloc_"), mirror=SHARED_DATA)[:2]]
        if name in counts:
            assert len(task.eval_docs) == counts[name]


def test_data_file_is_the_test_split(tmp_path):
    docs = load_docs("boolq", mirror=SHARED_DATA)[100:103]
    config = ours("headloc_boolq", data_file=jsonl(tmp_path / "b.jsonl", docs))
    task = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).load([config])["tasks"]
    assert [dict(d) for d in task["headloc_boolq"].eval_docs] == docs


# --------------------------------------------------------------------------- identity with built-ins


@pytest.mark.slow
def test_gsm8k_identical_to_builtin(tiny_lm, tmp_path):
    test = load_docs("gsm8k", mirror=SHARED_DATA)[:2]
    train = mirror_rows("gsm8k/train.jsonl.gz")
    theirs = builtin("gsm8k/gsm8k.yaml", {
        "test": jsonl(tmp_path / "test.jsonl", [{"question": d["question"], "answer": d["answer"]}
                                                for d in test]),
        "train": jsonl(tmp_path / "train.jsonl", train)})
    mine = ours("headloc_gsm8k", data_file=jsonl(tmp_path / "ours.jsonl", test),
                mirror=str(SHARED_DATA))
    a, b = run(tiny_lm, [mine]), run(tiny_lm, [theirs])
    assert a[0]["arguments"][0][0].count("Question:") == 6  # 5-shot
    assert_identical(a, b, ["exact_match"])


def test_arithmetic_identical_to_builtin(tiny_lm, tmp_path):
    docs = load_docs("arithmetic", mirror=SHARED_DATA)
    picked = [d for d in docs if d["subset"] in ("1dc", "5ds") and int(d["id"][-4:]) < 3]
    configs = []
    for subset in ("1dc", "5ds"):
        raw = mirror_rows(f"arithmetic/raw_gpt3/{ARITHMETIC_SUBSETS[subset]}.jsonl.gz", 3)
        path = jsonl(tmp_path / f"{subset}.jsonl", raw)
        configs.append(builtin(f"arithmetic/arithmetic_{subset}.yaml", {"validation": path}))
    mine = ours("headloc_arithmetic", data_file=jsonl(tmp_path / "ours.jsonl", picked))
    assert_identical(run(tiny_lm, [mine]), run(tiny_lm, configs), ["acc"])


def test_boolq_identical_to_builtin(tiny_lm, tmp_path):
    docs = load_docs("boolq", mirror=SHARED_DATA)[:4]
    path = jsonl(tmp_path / "hub.jsonl", [{k: d[k] for k in ("question", "passage", "label")}
                                          for d in docs])
    theirs = builtin("super_glue/boolq/default.yaml", {"train": path, "validation": path})
    mine = ours("headloc_boolq", data_file=jsonl(tmp_path / "ours.jsonl", docs))
    assert_identical(run(tiny_lm, [mine]), run(tiny_lm, [theirs]), ["acc"])


def test_arc_challenge_identical_to_builtin(tiny_lm, tmp_path):
    docs = load_docs("arc_challenge", mirror=SHARED_DATA)[:4]
    hub = [{"id": d["arc_id"], **{k: d[k] for k in ("question", "choices", "answerKey")}} for d in docs]
    path = jsonl(tmp_path / "hub.jsonl", hub)
    theirs = builtin("arc/arc_challenge.yaml", {"train": path, "validation": path, "test": path})
    mine = ours("headloc_arc_challenge", data_file=jsonl(tmp_path / "ours.jsonl", docs),
                mirror=str(SHARED_DATA))
    assert_identical(run(tiny_lm, [mine]), run(tiny_lm, [theirs]), ["acc", "acc_norm"])


def test_mmlu_identical_to_builtin_per_subject_tasks(tiny_lm, tmp_path):
    """One task over all subjects = the per-subject built-ins, per-subject description included."""
    docs, dev = load_docs("mmlu", mirror=SHARED_DATA), load_docs("mmlu", "dev", mirror=SHARED_DATA)
    subjects = ("abstract_algebra", "high_school_us_history")
    picked = [d for s in subjects for d in [d for d in docs if d["subject"] == s][:2]]
    strip = ("question", "subject", "choices", "answer")
    configs = []
    for subject in subjects:
        files = {split: jsonl(tmp_path / f"{subject}.{split}.jsonl",
                              [{k: d[k] for k in strip} for d in rows if d["subject"] == subject])
                 for split, rows in (("test", picked), ("dev", dev))}
        configs.append(builtin(f"mmlu/default/mmlu_{subject}.yaml", files))
    mine = ours("headloc_mmlu", data_file=jsonl(tmp_path / "ours.jsonl", picked),
                mirror=str(SHARED_DATA))
    a = run(tiny_lm, [mine])
    assert a[-1]["arguments"][0][0].startswith(
        "The following are multiple choice questions (with answers) about high school us history.\n\n")
    assert_identical(a, run(tiny_lm, configs), ["acc"])


def test_mmlu_refuses_few_shot(tmp_path):
    docs = load_docs("mmlu", mirror=SHARED_DATA)[:1]
    mine = ours("headloc_mmlu", data_file=jsonl(tmp_path / "ours.jsonl", docs), mirror=str(SHARED_DATA))
    mine["num_fewshot"] = 5
    task = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).load([mine])["tasks"]
    with pytest.raises(ValueError, match="zero-shot only.*num_fewshot=5"):
        task["headloc_mmlu"].fewshot_context(task["headloc_mmlu"].eval_docs[0], 5)


def test_mmlu_descriptions_match_all_57_builtins():
    template = load_yaml(TASKS_DIR / "headloc_mmlu.yaml", resolve_func=False)["description"]
    from lm_eval.utils import apply_template

    subjects = sorted({d["subject"] for d in load_docs("mmlu", "dev", mirror=SHARED_DATA)})
    assert len(subjects) == 57
    for subject in subjects:
        expected = load_yaml(BUILTIN / "mmlu" / "default" / f"mmlu_{subject}.yaml",
                             resolve_func=False, recursive=False)["description"]
        assert apply_template(template, {"subject": subject}) == expected


@pytest.mark.parametrize("name", ["wmdp_bio", "wmdp_chem", "wmdp_cyber"])
def test_wmdp_identical_to_builtin(name, tiny_lm, tmp_path):
    docs = load_docs(name, mirror=SHARED_DATA)[:3]
    path = jsonl(tmp_path / "hub.jsonl", [{k: d[k] for k in ("answer", "question", "choices")}
                                          for d in docs])
    theirs = builtin(f"wmdp/{name}.yaml", {"test": path})
    mine = ours(f"headloc_{name}", data_file=jsonl(tmp_path / "ours.jsonl", docs))
    assert_identical(run(tiny_lm, [mine]), run(tiny_lm, [theirs]), ["acc"])


def test_hellaswag_hub_rows_identical_to_builtin(tiny_lm, tmp_path):
    """Hub-format rows (ctx_a/ctx_b) give exactly the built-in's queries and scores.

    The rows are made from the offline copy by splitting ``ctx`` before its last sentence
    (ctx_b lowercase, as in the real data), so the built-in's capitalization is exercised.
    """
    rows = []
    for r in mirror_rows("hellaswag/validation.klosax_preprocessed.jsonl.gz", 4):
        head, _, tail = r["ctx"].rpartition(". ")
        rows.append({"ind": r["index"], "activity_label": r["activity_label"],
                     "ctx_a": head + "." if head else tail, "ctx_b": tail.lower() if head else "",
                     "ctx": r["ctx"], "endings": r["endings"], "source_id": "x", "split": "val",
                     "split_type": "indomain", "label": str(r["label"])})
    path = jsonl(tmp_path / "hub.jsonl", rows)
    theirs = builtin("hellaswag/hellaswag.yaml", {"train": path, "validation": path})
    docs = normalize("hellaswag", rows)
    offline = normalize("hellaswag", [{k: v for k, v in r.items() if k not in ("ctx_a", "ctx_b")}
                                      for r in rows])
    # the capitalization of ctx_b, which the offline copy cannot reproduce
    assert [d["query"] for d in docs] != [d["query"] for d in offline]
    mine = ours("headloc_hellaswag", data_file=jsonl(tmp_path / "ours.jsonl", docs))
    assert_identical(run(tiny_lm, [mine]), run(tiny_lm, [theirs]), ["acc", "acc_norm"])


# --------------------------------------------------------------------------- code tasks


def builtin_code_utils(folder: str) -> ast.Module:
    return ast.parse((BUILTIN / folder / "utils.py").read_text())


def test_mbpp_templates_are_the_builtins():
    mine = load_yaml(TASKS_DIR / "headloc_mbpp.yaml", resolve_func=False)
    theirs = load_yaml(BUILTIN / "mbpp" / "mbpp.yaml", resolve_func=False)
    for key in ("doc_to_text", "doc_to_target", "target_delimiter", "generation_kwargs",
                "num_fewshot", "output_type", "unsafe_code"):
        assert mine[key] == theirs[key], key
    assert mine["fewshot_config"]["sampler"] == theirs["fewshot_config"]["sampler"] == "first_n"
    function = next(node for node in builtin_code_utils("mbpp").body
                    if isinstance(node, ast.FunctionDef) and node.name == "list_fewshot_samples")
    from headloc.tasks.paper_utils import mbpp_fewshot_samples

    assert mbpp_fewshot_samples() == ast.literal_eval(function.body[0].value)
    prompts = {d["task_id"]: d for d in mirror_rows("mbpp/prompt.jsonl")}
    for sample in mbpp_fewshot_samples():  # the prompt split's problems 2-4
        assert sample["text"] == prompts[sample["task_id"]]["text"]


def test_humaneval_templates_are_the_builtin_instruct_variant():
    mine = load_yaml(TASKS_DIR / "headloc_humaneval.yaml", resolve_func=False)
    theirs = load_yaml(BUILTIN / "humaneval" / "humaneval_instruct.yaml", resolve_func=False)
    base = load_yaml(BUILTIN / "humaneval" / "humaneval.yaml", resolve_func=False)
    for key in ("doc_to_text", "gen_prefix"):
        assert mine[key] == theirs[key], key
    for key in ("doc_to_target", "generation_kwargs", "num_fewshot", "output_type", "unsafe_code",
                "repeats"):
        assert mine[key] == base[key], key
    assert mine["filter_list"][0]["name"] == theirs["filter_list"][0]["name"] == "create_test"
    function = next(node for node in builtin_code_utils("humaneval").body
                    if isinstance(node, ast.FunctionDef) and node.name == "build_predictions_instruct")
    from headloc.tasks import paper_utils

    ns: dict = {}
    exec(compile(ast.Module([function], []), "builtin", "exec"), {"list": list}, ns)
    resps, docs = [["    return 1\n```\nmore"], ["    return 2"]], [{"prompt": "def f():\n"}] * 2
    assert paper_utils.build_predictions_instruct(resps, docs) == ns["build_predictions_instruct"](resps, docs)


@pytest.mark.parametrize("name", ["headloc_mbpp", "headloc_humaneval"])
def test_code_tasks_refuse_without_opt_in(name):
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                          metadata={"mirror": str(SHARED_DATA)})
    with pytest.raises(Exception, match=r"executes model-written code.*allow_code_execution: true"):
        manager.load([name])


def code_task(name: str, n: int):
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False,
                          metadata={"mirror": str(SHARED_DATA), "allow_code_execution": True,
                                    "n_docs": n})
    return manager.load([name])["tasks"][name]


def test_mbpp_scores_reference_solution_1_and_wrong_code_0(sandbox):
    task = code_task("headloc_mbpp", 3)
    for doc in task.eval_docs:
        assert task.process_results(doc, [doc["code"]]) == {"pass_at_1": 1.0}
        assert task.process_results(doc, ["def nothing():\n    pass"]) == {"pass_at_1": 0.0}
    doc = task.eval_docs[0]
    assert task.process_results(doc, [doc["code"] + "\nwhile True:\n    pass"]) == {"pass_at_1": 0.0}


def test_humaneval_scores_reference_solution_1_and_wrong_code_0(sandbox):
    from headloc.tasks.paper_utils import build_predictions_instruct

    task = code_task("headloc_humaneval", 3)
    for doc in task.eval_docs:
        right = build_predictions_instruct([[doc["canonical_solution"] + "```\nDone."]], [doc])[0]
        wrong = build_predictions_instruct([["    return None\n```"]], [doc])[0]
        assert task.process_results(doc, [right]) == {"pass_at_1": 1.0}
        assert task.process_results(doc, [wrong]) == {"pass_at_1": 0.0}


@pytest.mark.slow
def test_code_tasks_end_to_end(tiny_lm, sandbox, tmp_path):
    for name, n in (("headloc_mbpp", 2), ("headloc_humaneval", 1)):
        metric, chat = METRICS[name]
        docs = load_docs(name.removeprefix("headloc_"), mirror=SHARED_DATA)[:n]
        config = ours(name, data_file=jsonl(tmp_path / f"{name}.jsonl", docs),
                      mirror=str(SHARED_DATA), allow_code_execution=True)
        loaded = TaskManager(include_path=str(TASKS_DIR), include_defaults=False).load([config])
        output = evaluate(lm=tiny_lm, task_dict=loaded, bootstrap_iters=0, log_samples=True,
                          apply_chat_template=chat, confirm_run_unsafe_code=True, verbosity="WARNING")
        assert output["results"][name][metric] == 0.0  # a random model writes no working code
        assert [s["doc"]["id"] for s in output["samples"][name]] == [d["id"] for d in docs]
