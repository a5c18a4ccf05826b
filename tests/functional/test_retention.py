"""Retention@k (`relrep_hf.functional.retention`) on hand-placed vectors."""

from __future__ import annotations

import pytest
import torch

from relrep_hf.functional.retention import retention_at_k, top_k_neighbours


def test_retention_counts_the_reference_top_k_the_served_search_keeps():
    # unit circle: query at angle 0; keys at angles 0.1, 0.2, 0.3, 3.0 (cosine order 0, 1, 2, 3)
    angles = torch.tensor([0.1, 0.2, 0.3, 3.0], dtype=torch.float64)
    keys = torch.stack([angles.cos(), angles.sin()], dim=1)  # [4, 2]
    query = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    assert top_k_neighbours(query, keys, 2).tolist() == [[0, 1]]
    # served: key 1 moved far away, so the served top 2 is {0, 2}: 1 of the reference 2 kept
    served = keys.clone()
    served[1] = torch.tensor([-1.0, 0.0])
    assert retention_at_k(query, served, query, keys, 2) == 0.5
    assert retention_at_k(query, keys, query, keys, 3) == 1.0
    # exclude_own: query i never counts key i (paired rows)
    both = torch.cat([query, keys[:3]])  # [4, 2]
    assert 0 not in top_k_neighbours(both, both, 2, exclude_own=True)[0].tolist()
    with pytest.raises(ValueError, match="Need more than k=4 keys"):
        top_k_neighbours(query, keys, 4, exclude_own=True)
    with pytest.raises(ValueError, match="queries are 2-d but keys are 3-d"):
        top_k_neighbours(query, torch.ones(4, 3), 1)
    with pytest.raises(ValueError, match="pass the same queries and documents"):
        retention_at_k(query, keys[:3], query, keys, 2)
