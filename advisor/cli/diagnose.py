"""`advisor classify`, `advisor rules …` and `advisor model …`: diagnosis without a store (the
model's commands read one's operators' corrections with --store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from advisor.cli.common import advisor_for, echo_json, json_option, write_file
from advisor.cli.group import AdvisorGroup
from advisor.core.errors import InputError
from advisor.front import Advisor
from advisor.reports.render import clip, safe_text

rules_option = click.option(
    "--rules",
    "rules_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A folder of extra .toml rule files (repeatable); a rule with a shipped id replaces it.",
)
model_option = click.option(
    "--model",
    "model_path",
    type=click.Path(path_type=Path),
    help="A model file written by `advisor model train` instead of the shipped one.",
)


@click.command()
@click.argument("file")
@rules_option
@model_option
@json_option
def classify(
    file: str, rules_dirs: tuple[Path, ...], model_path: Path | None, as_json: bool
) -> None:
    """Classify a log FILE (journalctl -o json, or plain text; - for stdin).

    Exit 0 whenever the log could be read, whatever the label.

    \b
    Examples:
      advisor classify crash.log
      journalctl -u vllm -o json | advisor classify - --json
    """
    done = Advisor(None).classify(file, rules_dirs, model_path)
    result = done.result
    _echo_malformed(file, done.malformed, done.read)
    if as_json:
        echo_json(result)
        return
    click.echo(f"label:      {result['label']} (confidence {result['confidence']:.2f})")
    for candidate in result["candidates"]:
        source = candidate["source"] + (f" {candidate['rule']}" if "rule" in candidate else "")
        click.echo(f"  candidate {candidate['label']} {candidate['confidence']:.2f} ({source})")
    facts = {k: v for k, v in result["facts"].items() if v is not None}
    if facts:
        click.echo("facts:")
        for key, value in facts.items():
            click.echo(f"  {key}: {safe_text(str(value))}")
    if result["evidence"]:
        click.echo("evidence:")
        for item in result["evidence"]:
            click.echo(f"  {item['line']:>6}  {clip(safe_text(item['text']), 240)}")
    _echo_plan(result["actions"])
    if len(result["runs"]) > 1:
        click.echo("runs:")
        for run in result["runs"]:
            click.echo(
                f"  lines {run['first_line']}-{run['last_line']}: {run['label']} "
                f"({run['confidence']:.2f})"
            )


def _echo_malformed(file: str, malformed: list[tuple[int, str]], read: int) -> None:
    """On stderr: the journal lines that were skipped; InputError when no line was usable."""
    if not malformed:
        return
    name = "<stdin>" if file == "-" else file
    line_no, reason = malformed[0]
    if not read:
        raise InputError(
            f"{name}: none of its {len(malformed)} line(s) could be read "
            f"(line {line_no}: {safe_text(reason)})"
        )
    click.echo(
        f"{name}: skipped {len(malformed)} malformed line(s) "
        f"(first: line {line_no}: {safe_text(reason)})",
        err=True,
    )


def _echo_plan(actions: list[dict[str, Any]]) -> None:
    """The plan, each step with why and the arithmetic behind its numbers."""
    if not actions:
        return
    click.echo("plan:")
    for n, step in enumerate(actions, start=1):
        click.echo(safe_text(f"  {n}. {Advisor.step_title(step)}: {step.get('why', '')}"))
        for line in step.get("arithmetic", ()):
            click.echo(safe_text(f"       {line}"))


@click.group("rules", cls=AdvisorGroup)
def rules_group() -> None:
    """Inspect and try the rule files.

    \b
    Examples:
      advisor rules list
      advisor rules test vllm.sampler-warmup-oom crash.log
    """


@rules_group.command("list")
@rules_option
@json_option
def rules_list(rules_dirs: tuple[Path, ...], as_json: bool) -> None:
    """List the rules in force (shipped ones, then --rules folders), in tier order.

    \b
    Examples:
      advisor rules list --rules ./my-rules --json
    """
    rows = [
        {
            "id": r.id,
            "label": r.spec.label,
            "tier": r.spec.tier,
            "confidence": r.spec.confidence,
            "file": r.origin,
        }
        for r in Advisor(None).rules(rules_dirs)
    ]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(
            f"{row['id']:<40} {row['label']:<20} {row['tier']:<9} "
            f"{row['confidence']:.2f}  {row['file']}"
        )


@rules_group.command("test")
@click.argument("rule_id")
@click.argument("file")
@rules_option
@json_option
def rules_test(rule_id: str, file: str, rules_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Show whether rule RULE_ID fires on each run of log FILE, and on which line.

    Exit 0 if it fires on some run, 1 if it fires on none.

    \b
    Examples:
      advisor rules test vllm.sampler-warmup-oom crash.log --rules ./my-rules
    """
    results = Advisor(None).try_rule(rule_id, file, rules_dirs)
    if as_json:
        echo_json(results)
    else:
        for r in results:
            where = f"line {r['line']} (phase {r['phase']})" if r["fired"] else "does not fire"
            click.echo(f"run {r['run']}: {rule_id} {where}")
    if not any(r["fired"] for r in results):
        raise SystemExit(1)


@click.group("model", cls=AdvisorGroup)
def model_group() -> None:
    """Train and evaluate the learned model.

    \b
    Examples:
      advisor model evaluate --golden tests/golden
    """


store_option = click.option(
    "--store",
    "store_url",
    default=None,
    metavar="URL",
    help="A store (sqlite:///PATH or postgresql+psycopg://...) whose operators' corrections "
    "(`advisor label`) to use.",
)
corpus_option = click.option(
    "--corpus",
    type=click.Path(path_type=Path),
    default=None,
    help="Training corpus (default: data/corpus.jsonl.gz of this checkout).",
)


@model_group.command("train")
@corpus_option
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where to write the model (default: the shipped advisor/diagnosis/model.json).",
)
@store_option
@rules_option
@json_option
def model_train(
    corpus: Path | None,
    out: Path | None,
    store_url: str | None,
    rules_dirs: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Train the model on the corpus (deterministic) and write it as JSON. With --store,
    also on the incidents the store's operators corrected (`advisor label`): each one's
    first run, labelled as they said, weighted 3 times a corpus example.

    \b
    Examples:
      advisor model train --out model.json
      advisor model train --store sqlite:////var/lib/advisor/events.db --out model.json
    """
    adv = Advisor(None) if store_url is None else advisor_for(store_url, read_only=True)
    result, target = adv.train(corpus, rules_dirs, out, with_store=store_url is not None)
    write_file(target, result.model.to_json())
    if as_json:
        echo_json(
            {
                "examples": result.examples,
                "features": len(result.model.weights),
                "temperature": result.model.temperature,
                "seconds": round(result.seconds, 1),
                "out": str(target),
            }
        )
        return
    click.echo(
        f"trained on {result.examples} examples, {len(result.model.weights)} features, "
        f"temperature {result.model.temperature:.2f}, in {result.seconds:.1f} s"
    )
    click.echo(f"wrote {target}")


@model_group.command("evaluate")
@corpus_option
@click.option(
    "--folds",
    type=click.IntRange(min=2, max=20),
    default=5,
    show_default=True,
    help="Folds of the stratified cross-validation (not used with --hold-out).",
)
@click.option(
    "--hold-out",
    "hold_out",
    type=click.Choice(["versions", "shapes", "engines"]),
    default=None,
    help="Instead of stratified folds, leave out one whole group at a time: an engine "
    "version series, a log shape, or an engine; train on the rest, test on it.",
)
@click.option(
    "--golden",
    type=click.Path(path_type=Path),
    default=None,
    help="Also score the shipped model on a folder of golden logs (label folders).",
)
@click.option(
    "--calibration",
    is_flag=True,
    help="With --hold-out: the reliability diagram (confidence bins against observed "
    "accuracy) and the expected calibration error.",
)
@store_option
@rules_option
@model_option
@json_option
def model_evaluate(
    corpus: Path | None,
    folds: int,
    hold_out: str | None,
    golden: Path | None,
    calibration: bool,
    store_url: str | None,
    rules_dirs: tuple[Path, ...],
    model_path: Path | None,
    as_json: bool,
) -> None:
    """Stratified cross-validation: per-label precision, recall, F1, confusion matrix.

    With --hold-out, a generalisation check: per fold (the group left out) n, accuracy and
    macro-F1, then the pooled scores of the label rules and model combine into (with
    --calibration, how often a label given at each confidence is right). With --store,
    how often rules and model (the shipped one, or --model) agree with the labels the
    store's operators gave (instead of the cross-validation, unless --hold-out).

    \b
    Examples:
      advisor model evaluate --folds 5 --golden tests/golden
      advisor model evaluate --hold-out engines --json
      advisor model evaluate --hold-out shapes --calibration
      advisor model evaluate --store sqlite:////var/lib/advisor/events.db
    """
    if calibration and hold_out is None:
        raise click.UsageError("--calibration needs --hold-out")
    adv = Advisor(None) if store_url is None else advisor_for(store_url, read_only=True)
    reports = adv.evaluate(
        corpus,
        folds=folds,
        hold_out=hold_out,
        golden=golden,
        rules_dirs=rules_dirs,
        calibration=calibration,
        with_store=store_url is not None,
        model_path=model_path,
    )
    if as_json:
        echo_json(reports)
        return
    for name, rep in reports.items():
        click.echo(Advisor.evaluation_text(name, rep))
