"""The one table of moved public paths: each old import path and its new home.

Like sentence-transformers' ``util/deprecated_import.py``: a module that moved is a row here,
not a shim module left at its old path. Saved artifacts record import paths
(sentence-transformers' ``modules.json``, ``py:`` encoder specs in ``run.json``), so an old path
keeps importing: a meta-path finder (installed by ``import relrep_hf``) answers an old module
path with the module at its new home, a module whose public function was renamed answers
the old name through `deprecated_attributes`, and the old path of a module split in several
homes (no file left there) is answered with a module of its names only, each read from its row. Both warn with a `DeprecationWarning` that names
the new home. Imports nothing of relrep_hf.

>>> import sys, warnings
>>> install_deprecated_imports()
>>> _ = sys.modules.pop("relrep_hf.functional.tables", None)  # warned once per process
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     tables = importlib.import_module("relrep_hf.functional.tables")
>>> tables.__name__, "relrep_hf.functional.markdown_tables" in str(caught[0].message)
('relrep_hf.functional.markdown_tables', True)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["DEPRECATED_PATHS", "deprecated_attributes", "install_deprecated_imports"]

DEPRECATED_PATHS: dict[str, str] = {
    # modules: old module path -> new module path
    "relrep_hf.sentence_transformers_module": "relrep_hf.models.sentence_transformers_module",
    "relrep_hf.training.sentence_transformers_module": (
        "relrep_hf.models.sentence_transformers_module"
    ),
    "relrep_hf.packaged_encoders": "relrep_hf.encoding.packaged_encoders",
    "relrep_hf.functional.tables": "relrep_hf.functional.markdown_tables",
    "relrep_hf.training.anchor_methods": "relrep_hf.anchors.anchor_methods",
    "relrep_hf.publishing.cards.folders": "relrep_hf.publishing.cards.folder_cards",
    "relrep_hf.training.param_trainer": "relrep_hf.anchors.param.trainer",
    "relrep_hf.training.param_data": "relrep_hf.anchors.param.data",
    "relrep_hf.training.param_checkpoints": "relrep_hf.anchors.param.checkpoints",
    "relrep_hf.training.shared_linear_trainer": "relrep_hf.anchors.shared_linear.trainer",
    # names: old module.name -> new module.name (the old module reads them, see below)
    "relrep_hf.utils.hub_files.push_folder": "relrep_hf.utils.hub_files.commit_folder",
    "relrep_hf.encoding.batches.PROGRESS_DELAY_SECONDS": (
        "relrep_hf.encoding.progress.PROGRESS_DELAY_SECONDS"
    ),
    # a module split in several homes: each of its names (the old path answers them, see below)
    "relrep_hf.training.anchor_arguments.FitArguments": (
        "relrep_hf.anchors.arguments.FitArguments"
    ),
    "relrep_hf.training.anchor_arguments.SharedLinearArguments": (
        "relrep_hf.anchors.shared_linear.arguments.SharedLinearArguments"
    ),
    "relrep_hf.training.anchor_arguments.ParamTrainingArguments": (
        "relrep_hf.anchors.param.arguments.ParamTrainingArguments"
    ),
    "relrep_hf.training.anchor_arguments.loss_weight_field": (
        "relrep_hf.anchors.param.arguments.loss_weight_field"
    ),
    # names a public package no longer exports (issue #45, item 4: a surface a user can hold):
    # old package.name -> its public name now, or the module that defines it
    "relrep_hf.embeddings_tensor": "relrep_hf.encoding.embeddings_tensor",
    "relrep_hf.extract_embeddings": "relrep_hf.encoding.extract_embeddings",
    "relrep_hf.SIMILARITIES": "relrep_hf.functional.similarities.SIMILARITIES",
    "relrep_hf.relative_projection": "relrep_hf.functional.relative_projection",
    "relrep_hf.whitening_matrix": "relrep_hf.functional.whitening_matrix",
    "relrep_hf.StoreSpace": "relrep_hf.migration.StoreSpace",
    "relrep_hf.SWAPPABLE_HEAD_LAYERS": (
        "relrep_hf.models.configuration_relative_head.SWAPPABLE_HEAD_LAYERS"
    ),
    "relrep_hf.check_head_matches_projector": (
        "relrep_hf.models.modeling_relative_head.check_head_matches_projector"
    ),
    "relrep_hf.RelativeWrapperOutput": (
        "relrep_hf.models.modeling_relative_wrapper.RelativeWrapperOutput"
    ),
    "relrep_hf.RelativeWrapperWithHead": (
        "relrep_hf.models.modeling_relative_wrapper.RelativeWrapperWithHead"
    ),
    "relrep_hf.push_artifact": "relrep_hf.publishing.hub.push_artifact",
    "relrep_hf.choose_num_directions": "relrep_hf.training.head_directions.choose_num_directions",
    "relrep_hf.HeadTrainOutput": "relrep_hf.training.head_trainer.HeadTrainOutput",
    "relrep_hf.SharedLinearTuningArguments": (
        "relrep_hf.anchors.shared_linear.trainer.SharedLinearTuningArguments"
    ),
    "relrep_hf.fine_tune_shared_linear": (
        "relrep_hf.anchors.shared_linear.trainer.fine_tune_shared_linear"
    ),
    "relrep_hf.encoding.PROGRESS_DELAY_SECONDS": (
        "relrep_hf.encoding.progress.PROGRESS_DELAY_SECONDS"
    ),
    "relrep_hf.encoding.max_input_length": "relrep_hf.encoding.batches.max_input_length",
    "relrep_hf.encoding.progress_bar": "relrep_hf.encoding.progress.progress_bar",
    "relrep_hf.encoding.warn_truncated": "relrep_hf.encoding.batches.warn_truncated",
    "relrep_hf.encoding.BUNDLED_SENTENCES_ID": "relrep_hf.encoding.corpora.BUNDLED_SENTENCES_ID",
    "relrep_hf.encoding.sentence_labels": "relrep_hf.encoding.corpora.sentence_labels",
    "relrep_hf.encoding.template_sentences": "relrep_hf.encoding.corpora.template_sentences",
    "relrep_hf.encoding.ENCODER_KINDS": "relrep_hf.encoding.encoder_kinds.ENCODER_KINDS",
    "relrep_hf.encoding.Embedded": "relrep_hf.encoding.encoder_kinds.Embedded",
    "relrep_hf.encoding.EmbedRequest": "relrep_hf.encoding.encoder_kinds.EmbedRequest",
    "relrep_hf.encoding.EncoderKind": "relrep_hf.EncoderKind",
    "relrep_hf.encoding.encoder_kind": "relrep_hf.encoding.encoder_kinds.encoder_kind",
    "relrep_hf.encoding.encoder_kinds_help": "relrep_hf.encoding.encoder_kinds.encoder_kinds_help",
    "relrep_hf.encoding.register_encoder_kind": "relrep_hf.register_encoder_kind",
    "relrep_hf.encoding.unregister_encoder_kind": "relrep_hf.unregister_encoder_kind",
    "relrep_hf.encoding.ArraySpec": "relrep_hf.encoding.encoders.ArraySpec",
    "relrep_hf.encoding.ExtractionOptions": "relrep_hf.encoding.extraction.ExtractionOptions",
    "relrep_hf.encoding.InputModality": "relrep_hf.encoding.models.InputModality",
    "relrep_hf.encoding.Modality": "relrep_hf.encoding.models.Modality",
    "relrep_hf.encoding.base_model_for_hidden_states": (
        "relrep_hf.encoding.models.base_model_for_hidden_states"
    ),
    "relrep_hf.encoding.device_and_dtype": "relrep_hf.encoding.models.device_and_dtype",
    "relrep_hf.encoding.embedding_config": "relrep_hf.encoding.models.embedding_config",
    "relrep_hf.encoding.input_modality": "relrep_hf.encoding.models.input_modality",
    "relrep_hf.encoding.is_causal_decoder": "relrep_hf.encoding.models.is_causal_decoder",
    "relrep_hf.encoding.layer_hidden_states": "relrep_hf.encoding.models.layer_hidden_states",
    "relrep_hf.encoding.smollm2_gguf_path": (
        "relrep_hf.encoding.packaged_encoders.smollm2_gguf_path"
    ),
    "relrep_hf.encoding.LANGUAGES": "relrep_hf.encoding.parallel_corpus.LANGUAGES",
    "relrep_hf.encoding.PARALLEL_VERSES_ID": (
        "relrep_hf.encoding.parallel_corpus.PARALLEL_VERSES_ID"
    ),
    "relrep_hf.encoding.TOPICS": "relrep_hf.encoding.parallel_corpus.TOPICS",
    "relrep_hf.encoding.POOLINGS": "relrep_hf.encoding.pooling.POOLINGS",
    "relrep_hf.encoding.pool_model_output": "relrep_hf.encoding.pooling.pool_model_output",
    "relrep_hf.encoding.pool_model_outputs": "relrep_hf.encoding.pooling.pool_model_outputs",
    "relrep_hf.encoding.validate_pooling": "relrep_hf.encoding.pooling.validate_pooling",
    "relrep_hf.evaluation.RelrepEvaluator": "relrep_hf.evaluation.evaluators.RelrepEvaluator",
    "relrep_hf.evaluation.language_pair_rows": (
        "relrep_hf.evaluation.language_pairs.language_pair_rows"
    ),
    "relrep_hf.evaluation.new_figure": "relrep_hf.evaluation.plots.new_figure",
    "relrep_hf.evaluation.save": "relrep_hf.evaluation.plots.save",
    "relrep_hf.evaluation.build_projectors": (
        "relrep_hf.evaluation.stitching_steps.build_projectors"
    ),
    "relrep_hf.evaluation.head_f1": "relrep_hf.evaluation.stitching_steps.head_f1",
    "relrep_hf.evaluation.retrieval_matrix": (
        "relrep_hf.evaluation.stitching_steps.retrieval_matrix"
    ),
    "relrep_hf.evaluation.standardize": "relrep_hf.evaluation.stitching_steps.standardize",
    "relrep_hf.evaluation.train_classifier": (
        "relrep_hf.evaluation.stitching_steps.train_classifier"
    ),
    "relrep_hf.evaluation.ALGORITHM_1": "relrep_hf.evaluation.zero_shot.ALGORITHM_1",
    "relrep_hf.evaluation.PAPER_TABLE_1": "relrep_hf.evaluation.zero_shot.PAPER_TABLE_1",
    "relrep_hf.functional.farthest_point_mixture": (
        "relrep_hf.functional.anchor_strategies.farthest_point_mixture"
    ),
    "relrep_hf.functional.kmeans_mixture": "relrep_hf.functional.anchor_strategies.kmeans_mixture",
    "relrep_hf.functional.random_mixture": "relrep_hf.functional.anchor_strategies.random_mixture",
    "relrep_hf.functional.sample_support_rows": (
        "relrep_hf.functional.anchor_strategies.sample_support_rows"
    ),
    "relrep_hf.functional.LeastSquaresOperator": (
        "relrep_hf.functional.least_squares.LeastSquaresOperator"
    ),
    "relrep_hf.functional.least_squares_operator": (
        "relrep_hf.functional.least_squares.least_squares_operator"
    ),
    "relrep_hf.functional.LossWeights": "relrep_hf.functional.losses.LossWeights",
    "relrep_hf.functional.coverage_loss": "relrep_hf.functional.losses.coverage_loss",
    "relrep_hf.functional.info_nce_loss": "relrep_hf.functional.losses.info_nce_loss",
    "relrep_hf.functional.length_loss": "relrep_hf.functional.losses.length_loss",
    "relrep_hf.functional.multi_space_info_nce": "relrep_hf.functional.losses.multi_space_info_nce",
    "relrep_hf.functional.orthogonality_loss": "relrep_hf.functional.losses.orthogonality_loss",
    "relrep_hf.functional.param_loss": "relrep_hf.functional.losses.param_loss",
    "relrep_hf.functional.format_table": "relrep_hf.functional.markdown_tables.format_table",
    "relrep_hf.functional.markdown_table": "relrep_hf.functional.markdown_tables.markdown_table",
    "relrep_hf.functional.mean_std": "relrep_hf.functional.markdown_tables.mean_std",
    "relrep_hf.functional.metric_label": "relrep_hf.functional.markdown_tables.metric_label",
    "relrep_hf.functional.summarize_seeds": "relrep_hf.functional.markdown_tables.summarize_seeds",
    "relrep_hf.functional.retrieval_ranks": "relrep_hf.functional.metrics.retrieval_ranks",
    "relrep_hf.functional.rr_std": "relrep_hf.functional.metrics.rr_std",
    "relrep_hf.functional.MIXING_KINDS": "relrep_hf.functional.mixing.MIXING_KINDS",
    "relrep_hf.functional.check_same_anchor_set": (
        "relrep_hf.functional.mixing.check_same_anchor_set"
    ),
    "relrep_hf.functional.fingerprint": "relrep_hf.functional.mixing.fingerprint",
    "relrep_hf.functional.ShrinkageSelection": (
        "relrep_hf.functional.regularization.ShrinkageSelection"
    ),
    "relrep_hf.functional.supported_rank": "relrep_hf.functional.regularization.supported_rank",
    "relrep_hf.functional.retention_of_neighbours": (
        "relrep_hf.functional.retention.retention_of_neighbours"
    ),
    "relrep_hf.functional.top_k_neighbours": "relrep_hf.functional.retention.top_k_neighbours",
    "relrep_hf.functional.SharedLinearFit": "relrep_hf.functional.shared_linear.SharedLinearFit",
    "relrep_hf.functional.fit_shared_linear": (
        "relrep_hf.functional.shared_linear.fit_shared_linear"
    ),
    "relrep_hf.functional.SIMILARITIES": "relrep_hf.functional.similarities.SIMILARITIES",
    "relrep_hf.functional.Similarity": "relrep_hf.Similarity",
    "relrep_hf.functional.get_similarity": "relrep_hf.functional.similarities.get_similarity",
    "relrep_hf.functional.register_similarity": "relrep_hf.register_similarity",
    "relrep_hf.functional.unregister_similarity": "relrep_hf.unregister_similarity",
    "relrep_hf.functional.Statistics": "relrep_hf.Statistics",
    "relrep_hf.migration.CANDIDATES": "relrep_hf.migration.candidates.CANDIDATES",
    "relrep_hf.migration.MIGRATION_CANDIDATES": (
        "relrep_hf.migration.candidates.MIGRATION_CANDIDATES"
    ),
    "relrep_hf.migration.MigrationCandidate": "relrep_hf.MigrationCandidate",
    "relrep_hf.migration.register_migration_candidate": "relrep_hf.register_migration_candidate",
    "relrep_hf.migration.unregister_migration_candidate": (
        "relrep_hf.unregister_migration_candidate"
    ),
    "relrep_hf.migration.anchor_path_maps": "relrep_hf.migration.fit.anchor_path_maps",
    "relrep_hf.migration.fit_migration": "relrep_hf.fit_migration",
    "relrep_hf.migration.MigrationMap": "relrep_hf.MigrationMap",
    "relrep_hf.migration.migrate_store": "relrep_hf.migrate_store",
    "relrep_hf.migration.ReembedEstimate": "relrep_hf.migration.reembed.ReembedEstimate",
    "relrep_hf.migration.reembed_store": "relrep_hf.reembed_store",
    "relrep_hf.migration.BLEND": "relrep_hf.migration.selection.BLEND",
    "relrep_hf.migration.DEFAULT_FOLDS": "relrep_hf.migration.selection.DEFAULT_FOLDS",
    "relrep_hf.migration.MigrationSelection": "relrep_hf.migration.selection.MigrationSelection",
    "relrep_hf.migration.STORE_KINDS": "relrep_hf.migration.stores.STORE_KINDS",
    "relrep_hf.migration.StoreKind": "relrep_hf.StoreKind",
    "relrep_hf.migration.register_store_kind": "relrep_hf.register_store_kind",
    "relrep_hf.migration.unregister_store_kind": "relrep_hf.unregister_store_kind",
    "relrep_hf.migration.MigratedLocation": "relrep_hf.migration.stores.database.MigratedLocation",
    "relrep_hf.translation.INVERTIBLE_SIMILARITIES": (
        "relrep_hf.translation.inverse.INVERTIBLE_SIMILARITIES"
    ),
    "relrep_hf.translation.IllConditionedInversionWarning": (
        "relrep_hf.translation.inverse.IllConditionedInversionWarning"
    ),
    "relrep_hf.translation.RelativeInverse": "relrep_hf.translation.inverse.RelativeInverse",
    "relrep_hf.translation.UnderdeterminedInversionWarning": (
        "relrep_hf.translation.inverse.UnderdeterminedInversionWarning"
    ),
    "relrep_hf.translation.relative_inverse": "relrep_hf.relative_inverse",
    "relrep_hf.translation.LatentTranslator": "relrep_hf.LatentTranslator",
    "relrep_hf.translation.translate": "relrep_hf.translate",
}
"""Old dotted path -> new dotted path: a module, or a module's public name (issue #45)."""


_FORWARDERS = (__name__, "relrep_hf.utils.lazy_imports")  # frames between a caller and _warn


def _warn(old: str, new: str) -> None:
    """The warning, pointed at the first caller outside importlib and the modules that forward
    an old name here."""
    stacklevel, frame = 2, sys._getframe(1)
    while frame is not None and (
        "importlib" in frame.f_code.co_filename or frame.f_globals.get("__name__") in _FORWARDERS
    ):
        # warnings.warn skips importlib's bootstrap frames itself: count the others
        bootstrap = (
            "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename
        )
        stacklevel, frame = stacklevel + (not bootstrap), frame.f_back
    warnings.warn(
        f"{old!r} moved to {new!r}: import it from there ({old!r} will be removed in a future "
        "version).",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _AliasLoader(importlib.abc.Loader):
    """Gives the already-imported module at the new home, without executing it again."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module
        self._spec = module.__spec__

    def create_module(self, spec: Any) -> types.ModuleType:
        return self._module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._spec  # the module keeps its own name and spec


class _SplitModuleLoader(importlib.abc.Loader):
    """Gives the old path of a split module: a module whose names are its rows' (warning)."""

    def create_module(self, spec: Any) -> types.ModuleType:
        return types.ModuleType(spec.name, f"Moved: each name of {spec.name} has a new home.")

    def exec_module(self, module: types.ModuleType) -> None:
        module.__getattr__ = deprecated_attributes(module.__name__)  # type: ignore[method-assign]


def _split_module_spec(fullname: str, path: Any) -> Any:
    """The spec of ``fullname`` if it is the old path of a split module: rows name some of its
    names and no file is left there (a module still there reads its rows itself)."""
    if not any(old.startswith(f"{fullname}.") for old in DEPRECATED_PATHS):
        return None
    if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
        return None
    return importlib.util.spec_from_loader(fullname, _SplitModuleLoader())


class _DeprecatedModuleFinder(importlib.abc.MetaPathFinder):
    """Answers an old module path of `DEPRECATED_PATHS` with the module at its new home."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = DEPRECATED_PATHS.get(fullname)
        if new is None:
            return _split_module_spec(fullname, path)
        try:
            module = importlib.import_module(new)
        except ModuleNotFoundError as error:
            if error.name != new:  # the new home lacks a dependency: say so
                raise
            return None  # a row of a renamed name, not of a module
        _warn(fullname, new)
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


def install_deprecated_imports() -> None:
    """Put the finder of old module paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _DeprecatedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeprecatedModuleFinder())


def deprecated_attributes(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module`` that answers its renamed names (rows of
    `DEPRECATED_PATHS` under ``module.``) from their new homes, with the warning."""

    def __getattr__(name: str) -> Any:
        new = DEPRECATED_PATHS.get(f"{module}.{name}")
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", new)
        home, _, attribute = new.rpartition(".")
        return getattr(importlib.import_module(home), attribute)

    return __getattr__
