"""The paper relrep_hf implements, as one BibTeX entry: cards, metrics and the README cite it."""

CITATION = """\
@article{svendsen2026improving,
  title         = {Improving Relative Representations with Learned Anchors and Whitened Inner Products},
  author        = {Svendsen, Oscar Thorsted and Jakobsen, Nikolaj Holst and Mager, Fabian and Nassar, Hiba},
  journal       = {arXiv preprint arXiv:2605.30596},
  year          = {2026},
  eprint        = {2605.30596},
  archivePrefix = {arXiv},
  primaryClass  = {cs.LG}
}"""
