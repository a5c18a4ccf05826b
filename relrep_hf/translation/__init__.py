"""The way back: relative coordinates returned to an encoder's absolute space.

- `inverse`: the inverse relative projection (least squares through the anchors, for every
  similarity), and the affine and Procrustes maps fitted on paired rows beside it;
- `translator`: latent space translation, ``translate(x) = invert(target, source(x))``, as a
  function, an affine map (`translation_map`) and a module (`LatentTranslator`).
"""
