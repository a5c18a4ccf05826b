"""Model cards of anchor sets, projectors, heads and migration maps, from the artifact's data.

The prose lives in Jinja templates (``model_cards/anchor_set.md``, ``projector.md``,
``head.md``, ``migration_map.md``), rendered by ``huggingface_hub.ModelCard.from_template``; the modules here compute
their fields (tables, snippets, the YAML metadata) from what the artifact stores, and never touch
the network. The metadata is built with `huggingface_hub.ModelCardData` and `EvalResult`, so the
``model-index`` is the Hub's format: one result per metric measured, with its dataset.

* `relrep_hf.publishing.cards.anchor_set_card`, `.projector_card`, `.head_card`,
  `.migration_map_card`: the four cards;
* `relrep_hf.publishing.cards.folder_cards`: writing a card into a saved artifact's folder;
* `relrep_hf.publishing.cards.sections`, `.templates`, `.heatmap`: the pieces.

Metrics the cards read: an anchor set's ``metrics`` (written by `ParamTrainer`)::

    {"retrieval": {"a->b": {"recall@1": .., "recall@5": .., "mrr": ..}, ...},
     "retrieval_rows": 2000,
     "zero_shot": {"a->b": {"f1": .., "accuracy": ..}, ...},     # optional
     "dataset": {"id": "org/data", "name": .., "config": .., "split": .., "revision": ..},
     "retrieval_dataset": {...}, "zero_shot_dataset": {...}}    # optional, per section

``"a->b"`` reads "queries embedded by a, keys (or the head's training encoder) b". Without a
dataset, the support reference's dataset is used, else the training data is named as such. A
head's ``metrics.json``: see `relrep_hf.publishing.cards.head_card`.

Cards never import the artifact classes: they read the facts in the saved files (or the same
attributes of an artifact object), and artifacts reach them through `relrep_hf.utils.publishing_hooks`.
"""

from relrep_hf.publishing.cards.anchor_set_card import anchor_set_card
from relrep_hf.publishing.cards.folder_cards import is_generated_card, write_card, write_folder_card
from relrep_hf.publishing.cards.head_card import HEAD_METRICS_NAME, head_card
from relrep_hf.publishing.cards.heatmap import HEATMAP_NAME, write_heatmap
from relrep_hf.publishing.cards.migration_map_card import migration_map_card
from relrep_hf.publishing.cards.projector_card import projector_card
from relrep_hf.publishing.cards.templates import render_template, template_dir
from relrep_hf.utils.citation import CITATION

__all__ = [
    "CITATION",
    "HEAD_METRICS_NAME",
    "HEATMAP_NAME",
    "anchor_set_card",
    "head_card",
    "is_generated_card",
    "migration_map_card",
    "projector_card",
    "render_template",
    "template_dir",
    "write_card",
    "write_folder_card",
    "write_heatmap",
]
