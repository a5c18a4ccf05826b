import copy
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

import relrep_hf
from relrep_hf import RelativeProjector, RelativeProjectorConfig, Statistics
from relrep_hf.functional.similarities import SIMILARITIES, relative_projection
from relrep_hf.functional.statistics import whitening_matrix
from relrep_hf.utils.io import atomic_directory

D, M = 16, 8
# A saved projector's folder, sorted (a RelativeWrapper's save writes the same files)
PROJECTOR_FILES = [
    "README.md",
    "config.json",
    "configuration_relative_projector.py",
    "manifest.json",
    "model.safetensors",
    "modeling_relative_projector.py",
]


@pytest.fixture(scope="module")
def data():
    generator = torch.Generator().manual_seed(0)
    mixing = torch.randn(D, D, generator=generator, dtype=torch.float64)
    return torch.randn(600, D, generator=generator, dtype=torch.float64) @ mixing + 2.0


@pytest.fixture(scope="module")
def projector(data):
    return RelativeProjector.from_statistics(
        data[:M], Statistics.from_embeddings(data), encoder_id="org/encoder", pooling="mean"
    )


@pytest.mark.parametrize("similarity", list(SIMILARITIES))
def test_forward_equals_the_pure_function(data, similarity):
    stats = Statistics.from_embeddings(data)
    projector = RelativeProjector.from_statistics(
        data[:M], stats, similarity=similarity, dtype=torch.float64
    )
    expected = relative_projection(
        data, data[:M], similarity=similarity, mean=stats.mean, whitening=whitening_matrix(stats)
    )
    torch.testing.assert_close(projector(data), expected, rtol=1e-10, atol=1e-10)


def test_wip_forward_is_one_affine_map(projector, data):
    x = data[:50].float()
    expected = torch.addmm(projector.bias, x, projector.weight)
    assert torch.equal(projector(x), expected)
    # and that map is the whitened inner product with the stored whitened anchors
    whitened = (x.double() - projector.mean.double()) @ projector.whitening.double()
    torch.testing.assert_close(
        projector(x).double(),
        whitened @ projector.whitened_anchors.double().T,
        rtol=1e-4,
        atol=1e-4,
    )


def test_config_records_sizes_and_provenance(projector):
    config = projector.config
    assert (config.hidden_size, config.num_anchors, config.similarity) == (D, M, "wip")
    assert (config.shrinkage, config.eps, config.statistics_count) == (0.15, 5e-8, 600)
    assert (config.encoder_id, config.pooling, config.layer, config.anchor_set_id) == (
        "org/encoder",
        "mean",
        -1,
        "",
    )
    assert not any(p.requires_grad for p in projector.parameters())


def test_output_does_not_depend_on_batch_size_or_order(projector, data):
    x = data[:64].float()
    together = projector(x)
    one_by_one = torch.cat([projector(row[None]) for row in x])
    torch.testing.assert_close(one_by_one, together, rtol=1e-6, atol=1e-5)
    order = torch.randperm(64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(projector(x[order]), together[order], rtol=1e-6, atol=1e-5)
    assert projector(x.view(4, 16, D)).shape == (4, 16, M)


def test_save_load_round_trip_is_bit_exact(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == PROJECTOR_FILES
    loaded = RelativeProjector.from_pretrained(tmp_path)
    for name, tensor in projector.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    saved, original = loaded.config.to_dict(), projector.config.to_dict()
    saved.pop("_name_or_path"), original.pop("_name_or_path")
    # the saved config also points AutoModel(trust_remote_code=True) at the bundled code
    assert saved.pop("auto_map") == {
        "AutoConfig": "configuration_relative_projector.RelativeProjectorConfig",
        "AutoModel": "modeling_relative_projector.RelativeProjector",
    }
    assert saved == original
    assert not any(p.requires_grad for p in loaded.parameters())


def test_automodel_returns_a_relative_projector(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    assert relrep_hf.RelativeProjector is RelativeProjector
    assert isinstance(AutoConfig.from_pretrained(tmp_path), RelativeProjectorConfig)
    loaded = AutoModel.from_pretrained(tmp_path)
    assert type(loaded) is RelativeProjector
    x = torch.randn(3, D)
    assert torch.equal(loaded(x), projector(x))


def test_bfloat16_load_keeps_statistics_usable(projector, data, tmp_path):
    """Everything is cast to bfloat16 (weights prepared in float64, rounded once); the output
    agrees with float32 to bfloat16 precision and keeps the nearest anchor of nearly every row."""
    projector.save_pretrained(tmp_path)
    half = RelativeProjector.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and half.whitening.dtype == torch.bfloat16
    x = data.float()
    full, low = projector(x), half(x).float()  # float32 input is cast to the projector's dtype
    agreement = torch.nn.functional.cosine_similarity(full, low).min().item()
    same_argmax = (full.argmax(-1) == low.argmax(-1)).float().mean().item()
    assert agreement > 0.999, agreement
    assert same_argmax > 0.97, same_argmax


def test_corrupted_or_truncated_weights_are_clear_errors(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    for broken in (data[: len(data) // 2], b"\x00" * 64, b"not a safetensors file"):
        weights.write_bytes(broken)
        with pytest.raises(OSError, match="corrupted or truncated.*save it again"):
            RelativeProjector.from_pretrained(tmp_path, verify=False)  # past the manifest


def test_config_sizes_that_disagree_with_the_tensors(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_anchors"] = M + 1
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"num_anchors={M + 1}.*different saves"):
        RelativeProjector.from_pretrained(tmp_path, verify=False)  # past the manifest


def test_a_missing_tensor_is_an_error(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["whitening"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(OSError, match=r"lacks the tensors \['whitening'\]"):
        RelativeProjector.from_pretrained(tmp_path, verify=False)  # past the manifest


def test_bad_embeddings(projector):
    x = torch.randn(5, D)
    x[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"NaN or Inf in 1 row\(s\) \(row 3\)"):
        projector(x)
    x[3, 2] = float("inf")
    with pytest.raises(ValueError, match="row 3"):
        projector(x)
    with pytest.raises(ValueError, match=f"last dimension is {D + 1}, expected {D}.*another"):
        projector(torch.randn(5, D + 1))


def test_bad_construction(data):
    stats = Statistics.from_embeddings(data)
    with pytest.raises(ValueError, match="Invalid similarity 'angular'"):
        RelativeProjector.from_statistics(data[:M], stats, similarity="angular")
    with pytest.raises(ValueError, match="needs the encoder's whitening statistics"):
        RelativeProjector.from_statistics(data[:M], None)
    with pytest.raises(ValueError, match="statistics have dimension 4 but the anchors have 16"):
        RelativeProjector.from_statistics(data[:M], Statistics.from_embeddings(torch.randn(9, 4)))
    with pytest.raises(ValueError, match="at least 2 embeddings"):
        RelativeProjector.from_statistics(data[:M], Statistics.from_embeddings(data[:1]))
    with pytest.raises(ValueError, match="anchors: NaN"):
        RelativeProjector.from_statistics(torch.full((2, D), float("nan")), stats)
    with pytest.raises(ValueError, match="Invalid similarity"):
        RelativeProjectorConfig(similarity="dot")
    # cosine needs no statistics
    projector = RelativeProjector.from_statistics(data[:M], None, similarity="cosine")
    assert projector.config.statistics_count == 0


def test_failed_save_leaves_the_previous_artifact(projector, tmp_path):
    projector.save_pretrained(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError, match="interrupted"), atomic_directory(tmp_path) as staging:
        (staging / "model.safetensors").write_bytes(b"half written")
        raise RuntimeError("interrupted")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert [p.name for p in tmp_path.parent.iterdir() if ".tmp-" in p.name] == []
    RelativeProjector.from_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------
# NumPy in, and the sentence-transformers trap (L2-normalised input, unnormalised statistics)
# ---------------------------------------------------------------------------------------------


def test_numpy_and_lists_project_like_tensors(data, projector):
    from relrep_hf import AnchorSet

    expected = projector(data[:5].float())
    torch.testing.assert_close(projector(data[:5].float().numpy()), expected)
    torch.testing.assert_close(projector(data[:5].tolist()), expected)
    anchor_set = AnchorSet.random([f"input {i}" for i in range(32)], M, seed=0)
    from_numpy = RelativeProjector.from_anchor_set(
        anchor_set, data[:32].numpy(), data.numpy(), dtype=torch.float64
    )
    from_tensors = RelativeProjector.from_anchor_set(
        anchor_set, data[:32], Statistics.from_embeddings(data), dtype=torch.float64
    )
    torch.testing.assert_close(from_numpy(data.numpy()), from_tensors(data), rtol=0, atol=0)


def test_the_projector_records_whether_its_statistics_were_normalised(data):
    unit = torch.nn.functional.normalize(data, dim=-1)
    raw = RelativeProjector.from_statistics(data[:M], Statistics.from_embeddings(data))
    normalised = RelativeProjector.from_statistics(unit[:M], Statistics.from_embeddings(unit))
    assert raw.config.normalized_embeddings is False
    # mean squared norm from the statistics alone: (tr(scatter) + N |mean|^2) / N
    assert raw.config.embedding_norm == pytest.approx(float(data.norm(dim=-1).pow(2).mean().sqrt()))
    assert normalised.config.normalized_embeddings is True
    assert normalised.config.embedding_norm == pytest.approx(1.0)


def test_normalised_input_to_an_unnormalised_projector_warns_once(data, tmp_path):
    unit = torch.nn.functional.normalize(data, dim=-1).float()
    raw = RelativeProjector.from_statistics(data[:M], Statistics.from_embeddings(data))
    raw.save_pretrained(tmp_path / "raw")
    loaded = RelativeProjector.from_pretrained(tmp_path / "raw")  # the record survives a save
    assert loaded.config.normalized_embeddings is False
    with pytest.warns(UserWarning, match="L2-normalised .* unnormalised embeddings"):
        loaded(unit[:4])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded(unit[4:8])  # checked on the first batch only
        raw_again = RelativeProjector.from_pretrained(tmp_path / "raw")
        raw_again(data[:4].float())  # the right kind of input: no warning


def test_unnormalised_input_to_a_normalised_projector_warns(data):
    unit = torch.nn.functional.normalize(data, dim=-1)
    normalised = RelativeProjector.from_statistics(unit[:M], Statistics.from_embeddings(unit))
    with pytest.warns(UserWarning, match="Normalise them first"):
        normalised(data[:4].float())
    import warnings

    cosine = RelativeProjector.from_statistics(
        unit[:M], Statistics.from_embeddings(unit), similarity="cosine"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cosine(data[:4].float())  # cosine ignores the input's scale: nothing to warn about


# ---------------------------------------------------------------------------------------------
# The finite check off the hot path (issue #48): deferred where reading a value waits


class HostReads(torch.overrides.TorchFunctionMode):
    """Records the tensor calls that copy a value to the host (on a GPU, each one waits for it)."""

    READS = frozenset(
        {
            "item",
            "__bool__",
            "__float__",
            "__int__",
            "__index__",
            "tolist",
            "numpy",
            "cpu",
            "nonzero",
        }
    )

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.READS:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def _deferred(projector) -> RelativeProjector:
    projector = RelativeProjector.from_statistics(
        projector.anchors.double(), None, similarity="inner"
    )  # a fresh one: the mode and its record are per projector
    projector.finite_check = "deferred"
    return projector


def test_a_deferred_forward_reads_nothing_off_the_device(projector, data):
    """The forward a GPU runs ("auto" defers off the CPU) makes no host read: no .item(), no
    bool(), no copy to the CPU; the immediate check does (so the recorder sees reads)."""
    deferred = _deferred(projector)
    x = data[:8].float()
    deferred(x)  # the first call checks input norms once (a read, on purpose): not per call
    with HostReads() as reads:
        for _ in range(3):
            deferred(x)
    assert reads.calls == []
    assert deferred._nonfinite.pending == 4
    immediate = copy.deepcopy(deferred)
    immediate.finite_check = "immediate"
    with HostReads() as reads:
        immediate(x)
    assert "item" in reads.calls


def test_a_deferred_check_raises_at_check_finite(projector, data):
    deferred = _deferred(projector)
    x = data[:6].float().clone()
    deferred(x)
    x[3, 2] = float("nan")
    relative = deferred(x)  # no error yet: nothing waited for the device
    assert not bool(torch.isfinite(relative[3]).any())
    deferred(data[:6].float())
    with pytest.raises(ValueError, match=r"NaN or Inf in the output of 1 of the 3 calls since the "
                       r"last check on cpu \(call 2\).*finite_check='immediate'"):  # fmt: skip
        deferred.check_finite()
    deferred.check_finite()  # the record is emptied by the check that raised
    deferred.finite_check = "immediate"  # and then the rows are named at the call
    with pytest.raises(ValueError, match=r"NaN or Inf in 1 row\(s\) \(row 3\)"):
        deferred(x)


def test_a_full_record_is_checked_before_reuse(projector, data):
    deferred = _deferred(projector)
    deferred._nonfinite.capacity = 3
    bad = data[:2].float().clone()
    bad[0, 0] = float("inf")
    deferred(bad)
    deferred(data[:2].float())
    deferred(data[:2].float())
    with pytest.raises(ValueError, match="1 of the 3 calls"):
        deferred(data[:2].float())  # the fourth call would reuse the slot of the first
    # a change of mode checks what the old one recorded
    deferred(bad)
    with pytest.raises(ValueError, match="1 of the 1 calls"):
        deferred.finite_check = "auto"
    assert deferred.finite_check == "auto"  # the mode is set, then the old record read
    deferred.finite_check = "deferred"
    # an empty batch records nothing; a float64 output gets a record of its own dtype
    deferred(data[:0].float())
    deferred.double()(bad.double())
    with pytest.raises(ValueError, match="1 of the 1 calls"):
        deferred.check_finite()


def test_finite_check_modes(projector, data):
    assert projector.finite_check == "auto"
    with pytest.raises(ValueError, match=r"Invalid finite_check 'lazy'\. Valid: 'auto', "):
        projector.finite_check = "lazy"
    bad = data[:4].float().clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"row 1\)"):  # "auto" on the CPU: at the call
        projector(bad)
    projector.check_finite()  # nothing deferred on the CPU


def test_the_deferred_check_errors_are_documented(projector, data):
    from tests.test_reliability import BAD_INPUTS_DOC, first_sentence

    section = BAD_INPUTS_DOC.read_text().split("## The projector's deferred finite check")[1]
    deferred = _deferred(projector)
    bad = data[:3].float().clone()
    bad[0, 0] = float("nan")
    errors = []
    for call in (
        lambda: [deferred(x) for x in (data[:3].float(), bad, data[:3].float())],
        deferred.check_finite,
        lambda: setattr(deferred, "finite_check", "lazy"),
    ):
        try:
            call()
        except ValueError as error:
            errors.append(first_sentence(str(error)).replace(" on cpu ", " on cuda:0 "))
    assert len(errors) == 2
    for error in errors:
        assert f"| ValueError: {error} |" in section, error
