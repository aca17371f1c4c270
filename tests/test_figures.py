"""The pictures of issue 22 §4 (``alignlings.content.figures``): their numbers against the
library's own losses (computed with torch), what each picture must show, the SVG in both
languages (cached), the text version, and the page and route that serve them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from alignlings.losses.dpo import dpo_loss
from alignlings.losses.kl import kl_k1, kl_k2, kl_k3
from alignlings.losses.ppo import gae as torch_gae
from alignlings.losses.ppo import ppo_policy_loss
from alignlings.content import figures


@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_curves_are_the_library_loss_and_its_gradient(beta):
    margins = np.array([-20.0, -3.0, 0.0, 2.5, 15.0])
    loss, weight = figures.dpo_curves(margins, beta)
    for m, lo, w in zip(margins, loss, weight):
        pc = torch.tensor([float(m)], dtype=torch.float64, requires_grad=True)
        zero = torch.zeros(1, dtype=torch.float64)
        ref = dpo_loss(pc, zero, zero, zero, beta=beta)
        ref.backward()
        assert lo == pytest.approx(ref.item(), rel=1e-12, abs=1e-12)
        assert w == pytest.approx(-pc.grad.item() / beta, rel=1e-9)  # the weight is -(1/β) dL/dΔ
    assert loss[2] == pytest.approx(np.log(2)) and weight[2] == pytest.approx(0.5)


@pytest.mark.parametrize("adv", [1.0, -1.0, 0.7])
def test_ppo_objective_is_the_library_clipped_surrogate(adv):
    ratios = np.array([0.5, 0.79, 0.95, 1.0, 1.05, 1.21, 1.7])
    obj, grad = figures.ppo_objective(ratios, adv, eps=0.2)
    for r, o, g in zip(ratios, obj, grad):
        logp = torch.tensor([[float(np.log(r))]], dtype=torch.float64, requires_grad=True)
        loss = ppo_policy_loss(logp, torch.zeros(1, 1, dtype=torch.float64), torch.tensor([[adv]], dtype=torch.float64),
                               torch.ones(1, 1), clip_range=0.2)
        loss.backward()
        assert o == pytest.approx(-loss.item(), rel=1e-12)
        assert g * r == pytest.approx(-logp.grad.item(), abs=1e-12)  # dρ/dlog ρ = ρ
    # the zero-gradient side: ρ > 1 + ε for A > 0, ρ < 1 - ε for A < 0
    flat = ratios[grad == 0]
    assert (flat > 1.2).all() if adv > 0 else (flat < 0.8).all()
    assert len(flat) == 2


def test_kl_estimators_are_the_library_ones_and_behave_as_the_picture_says():
    x = np.linspace(-3, 3, 61)
    k = figures.kl_estimators(x)
    t = torch.tensor(x, dtype=torch.float64)
    for name, fn in (("k1", kl_k1), ("k2", kl_k2), ("k3", kl_k3)):
        np.testing.assert_allclose(k[name], fn(t).numpy(), rtol=1e-12, atol=1e-15)
    assert (k["k1"] < 0).any() and (k["k2"] >= 0).all() and (k["k3"] >= 0).all()
    st = figures.kl_estimator_stats(np.array([0.5, 2.0]), n=100_000)
    se = st["k1"]["std"] / np.sqrt(100_000)
    assert (np.abs(st["k1"]["bias"]) < 4 * se).all()  # unbiased
    assert (np.abs(st["k3"]["bias"]) < 4 * st["k3"]["std"] / np.sqrt(100_000)).all()
    assert st["k2"]["bias"][1] > 1.0  # biased far from the reference (true KL 2, k2's mean ~4)
    assert st["k3"]["std"][0] < 0.5 * st["k1"]["std"][0]  # near the reference k3 spreads far less than k1


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_is_the_library_gae(lam):
    rng = np.random.default_rng(1)
    rewards, values = rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    ours = figures.gae(rewards, values, lam=lam)
    adv, _ = torch_gae(torch.tensor(rewards), torch.tensor(values), torch.ones(3, 7), gamma=1.0, lam=lam)
    np.testing.assert_allclose(ours, adv.numpy(), rtol=1e-12, atol=1e-12)


def test_gae_tradeoff_bias_falls_and_variance_rises_with_lambda():
    tr = figures.gae_tradeoff(np.array([0.0, 0.5, 0.9, 1.0]))
    assert tr["bias2"][0] == pytest.approx(0.4**2, abs=0.01)  # TD(0): the critic's 0.4 error
    assert tr["bias2"][-1] < 1e-3  # λ = 1: the return minus V, unbiased
    assert list(tr["var"]) == sorted(tr["var"]) and tr["var"][-1] == pytest.approx(9 * 0.09 + 1, rel=0.05)


@pytest.mark.parametrize("lang,word", [("en", "margin"), ("zh", "偏好对的权重")])
def test_svg_in_both_languages_is_cached(tmp_path, monkeypatch, lang, word):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    figures.svg.cache_clear()
    out = figures.svg("dpo-loss", lang)
    assert out.lstrip().startswith("<?xml") and "<svg" in out and word in out
    assert "http://" not in out.replace("http://www.w3.org", "").replace("http://purl.org", "").replace(
        "http://creativecommons.org", "").replace("http://matplotlib.org", "")  # nothing to fetch
    cached = list((tmp_path / "cache" / "figures").glob(f"dpo-loss-{lang}-*.svg"))
    assert len(cached) == 1 and cached[0].read_text(encoding="utf-8") == out
    figures.svg.cache_clear()
    cached[0].write_text(out.replace(word, word + "!"), encoding="utf-8")
    assert word + "!" in figures.svg("dpo-loss", lang)  # read back from the disk cache, not re-rendered
    figures.svg.cache_clear()


def test_text_versions_and_bad_arguments():
    for name in figures.NAMES:
        en, zh = figures.text(name, "en"), figures.text(name, "zh")
        assert en != zh and en.count("\n") > 8 and "-0.000 " not in en
    assert "1.20     0" in figures.text("ppo-clip", "en")  # ρ = 1.5, A > 0: clipped at 1 + ε, no gradient
    with pytest.raises(ValueError, match="name: expected one of"):
        figures.text("nope", "en")
    with pytest.raises(ValueError, match="lang: expected one of"):
        figures.svg("dpo-loss", "fr")
    assert figures.for_exercise("gae") == ("gae-lambda",) and figures.for_exercise("sft-loss") == ()


def test_pages_and_routes(tmp_path):
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    class NoGrader:
        def check(self, *a, **k):
            raise AssertionError

    app = create_app(None, db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False)
    with TestClient(app) as c:
        r = c.get("/figures/ppo-clip.svg?lang=zh")
        assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml") and "截断" in r.text
        assert c.get("/figures/nope.svg").status_code == 404
        narrow = c.get("/figures/ppo-clip.svg?lang=en&layout=narrow").text
        assert 'width="331.2pt" height="475.2pt"' in narrow  # the panels stacked, for a phone
        assert c.get("/figures/ppo-clip.svg?layout=tall").status_code == 422
        assert "A=+1" in c.get("/figures/ppo-clip.txt").text
        page = c.get("/exercises/kl-estimators?lang=en").text
        assert 'src="/figures/kl-estimators.svg?lang=en"' in page and "<details>" in page
        assert "/figures/" not in c.get("/exercises/sft-loss").text
