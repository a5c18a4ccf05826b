"""``relrep-hf bridge``: the new model's queries mapped into the old index's space, the index
untouched. The map (new -> old) is fitted on a run folder's training rows or read from a saved
map, appended to the new sentence-transformers model as a `relrep_hf.migration.bridge.Bridge`
module, and the model saved (and pushed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from relrep_hf.commands.arguments import add_command, add_hidden_alias


def register(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "bridge",
        help="no rewrite at all: append a map from the new model's space into the old index's "
        "to the new sentence-transformers model, so its encode() searches the old vectors as "
        "they are",
    )
    parser.add_argument(
        "run_dir",
        type=Path,
        nargs="?",
        default=None,
        help="a fitted run folder whose training rows fit the map (or give --map)",
    )
    parser.add_argument(
        "--source", metavar="NAME", help="the run's old encoder: the one the index was built with"
    )
    parser.add_argument(
        "--target", metavar="NAME", help="the run's new encoder: what --model's encode gives"
    )
    parser.add_argument(
        "--map",
        dest="map_path",
        metavar="MAP",
        default=None,
        help="instead of a run: a saved migration map from the new model to the old encoder "
        "(folder or Hub id)",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="the new sentence-transformers model (folder or Hub id) the bridge is appended to",
    )
    parser.add_argument(
        "--model-name",
        metavar="NAME",
        default=None,
        help="with --map: the name the map records for --model, its source (default: --model "
        "as given, its folder's name, the model's recorded base model); a map recording another "
        "source, or --model as its target (the wrong direction), is refused",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="where the bridged model is saved: a new or empty folder, or a sentence-"
        "transformers folder to replace",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="use --map although its own held-out report recommends re-embedding, or nothing "
        "(fewer held-out rows than a recommendation needs)",
    )
    repo_id = parser.add_argument(
        "--repo-id",
        metavar="REPO",
        default=None,
        help="also push the bridged model to this Hub repo",
    )
    add_hidden_alias(parser, repo_id, "--push-to-hub")  # its name before push's style
    parser.add_argument("--private", action="store_true", help="create a private repo")
    parser.add_argument("--revision", default=None, help="branch to push to")
    parser.add_argument("--token", default=None, help="Hub token (default: the logged-in one)")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let --model run code from its repo (sentence-transformers' trust_remote_code)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    from sentence_transformers import SentenceTransformer

    from relrep_hf.migration.bridge import append_bridge, check_bridge_map, save_bridged_model

    _check_sources(args)
    _check_out(args)
    # a saved map (and its recorded report) is checked before the model loads
    migration_map = _bridge_map(args) if args.map_path is not None else None
    model = SentenceTransformer(
        args.model, device="cpu", trust_remote_code=args.trust_remote_code, token=args.token
    )
    if migration_map is None:  # before the fit: a wrong model fails fast
        _check_model_gives_run_rows(model, args.model, args.run_dir, args.target)
        migration_map = _bridge_map(args)
    else:
        check_bridge_map(migration_map, args.model, _model_names(args, model))
    append_bridge(model, migration_map)
    save_bridged_model(model, args.out)
    chosen = migration_map.info.get("chosen")
    print(
        f"Saved {args.model} with a bridge into the space of "
        f"{migration_map.info.get('target') or 'the old encoder'} "
        f"({migration_map.in_features}-d -> {migration_map.out_features}-d, {chosen}) to "
        f"{args.out}; load it with SentenceTransformer({str(args.out)!r}, trust_remote_code=True)"
    )
    if args.repo_id:
        from relrep_hf.publishing.hub.push import push_folder

        commit = push_folder(
            lambda folder: model.save(str(folder)),
            args.repo_id,
            private=args.private or None,
            token=args.token,
            revision=args.revision,
        )
        print(f"{args.repo_id}: {commit}")


def _check_out(args: argparse.Namespace) -> None:
    """--out: not the --model folder, and nothing but a sentence-transformers model in it."""
    from relrep_hf.migration.bridge import BridgeError, check_bridge_out

    model_folder = Path(args.model)
    if model_folder.is_dir() and model_folder.resolve() == args.out.resolve():
        raise BridgeError(
            f"--out {args.out} is the --model folder itself: the new model would be replaced by "
            "the bridged one. Save the bridged model to another folder."
        )
    check_bridge_out(args.out)


def _model_names(args: argparse.Namespace, model) -> set[str]:
    """The names --model answers to: --model-name alone when given, else --model as given, its
    folder's name and the base model its card data records."""
    if args.model_name is not None:
        return {args.model_name}
    base = getattr(getattr(model, "model_card_data", None), "base_model", None)
    names = {args.model, Path(args.model).name}
    return names | ({base} if isinstance(base, str) else set())


def _check_sources(args: argparse.Namespace) -> None:
    """A run with --source and --target, or --map: exactly one way to the map."""
    from relrep_hf.migration.bridge import BridgeError

    from_run = args.run_dir is not None or args.source is not None or args.target is not None
    if from_run == (args.map_path is not None):
        raise BridgeError(
            "Give either a run folder with --source OLD --target NEW (the map is fitted on its "
            "training rows) or --map MAP (a saved map from the new model to the old encoder), "
            "not both."
            if from_run
            else "Give a run folder with --source OLD --target NEW, or --map MAP: the bridge "
            "needs a map from the new model to the old encoder."
        )
    if from_run and args.model_name is not None:
        raise BridgeError(
            "--model-name names --model for a saved --map; a run's --target names it already."
        )
    if from_run and None in (args.run_dir, args.source, args.target):
        raise BridgeError(
            "Fitting the bridge on a run needs the run folder, --source (the old encoder, the "
            "index's) and --target (the new one, what --model gives)."
        )


def _bridge_map(args: argparse.Namespace):
    """The saved map of --map, or the map from --target to --source fitted on the run."""
    from relrep_hf.migration.map import MigrationMap

    if args.map_path is not None:
        from relrep_hf.migration.report import check_recommendation

        migration_map = MigrationMap.from_pretrained(args.map_path, token=args.token)
        check_recommendation(migration_map.info, "the bridge", force=args.force)
        return migration_map
    from relrep_hf.pipeline.migration import run_migration_map

    # new -> old, scored as the bridge is used: mapped new-model queries search the old rows
    return run_migration_map(args.run_dir, args.target, args.source, direction="queries")


CHECK_ROWS = 8  # training rows re-embedded by --model to check it is the run's --target
CHECK_TOLERANCE = 1e-3  # relative: float32 encoders differ by ~1e-6 with the batch's padding


def _check_model_gives_run_rows(model, name: str, run_dir: Path, target: str) -> None:
    """Refuse a --model whose ``encode`` is not the space the run's --target rows are in (another
    model, pooling or a ``Normalize`` more or less): the map would be fitted on other vectors
    than the ones the bridge receives."""
    from relrep_hf.migration.bridge import BridgeError
    from relrep_hf.pipeline.run_folder import RunError, read_run, run_dataset, run_embeddings

    run = read_run(run_dir, fitted=True)
    entry = next((e for e in run["encoders"] if e["name"] == target), None)
    if entry is None:
        names = [e["name"] for e in run["encoders"]]
        raise RunError(f"Unknown encoder {target!r}; the run's encoders are {names}.")
    rows = run["train_rows"][:CHECK_ROWS]
    texts = run_dataset(run)[entry.get("column") or run["dataset"]["column"]]
    stored = run_embeddings(run_dir, run)[target][rows].double()  # [r, d]
    encoded = model.encode([texts[i] for i in rows], convert_to_tensor=True).cpu().double()
    if encoded.shape != stored.shape:
        difference = float("inf")
    else:
        difference = float((encoded - stored).norm() / stored.norm().clamp_min(1e-12))
    if not difference <= CHECK_TOLERANCE:
        raise BridgeError(
            f"The encode of --model {name} does not give the run's {target!r} rows (relative difference "
            f"{difference:.3g} on {len(rows)} training rows, {tuple(encoded.shape)} against "
            f"{tuple(stored.shape)}): the bridge would receive other vectors than the map was "
            f"fitted on. Give --model the sentence-transformers model that embedded {target!r}, "
            "with the same modules (pooling, Normalize), or fit the map yourself and pass --map."
        )
