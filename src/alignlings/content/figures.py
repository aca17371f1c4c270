"""Pictures that explain an exercise better than a paragraph: SVG (matplotlib), cached, offline,
in both languages, with the same content as text for the terminal.

- ``dpo-loss``: DPO's loss -log σ(βΔ) and its per-pair weight σ(-βΔ) against the margin Δ
  (Rafailov et al. 2023, §5: the weight is how wrong the implicit reward model is on the pair).
- ``ppo-clip``: PPO's clipped objective min(ρA, clip(ρ, 1-ε, 1+ε)A) against the ratio ρ for A > 0
  and A < 0, with the region where the gradient is zero (Schulman et al. 2017, fig. 1).
- ``kl-estimators``: k1, k2, k3 against log r, and their bias and spread when sampling
  (Schulman, "Approximating KL Divergence", 2020).
- ``gae-lambda``: GAE's λ on a sample trajectory, and the bias² and variance of Â_0 against λ, not added
  up: a batch of B trajectories divides the variance by B and leaves the bias (Schulman et al. 2016).

The numbers are computed here with numpy (the server never imports torch for a picture);
tests/test_figures.py checks them against the library's own losses (``alignlings.losses``).
Each SVG is rendered once per language and figure version, then served from memory and
``$ALIGNLINGS_HOME/cache/figures`` (or the platform cache). Labels: locales [practice.figures].
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from alignlings import i18n

NAMES = ("dpo-loss", "ppo-clip", "kl-estimators", "gae-lambda")

#: exercise id -> the pictures its page shows (under the statement)
EXERCISE_FIGURES: dict[str, tuple[str, ...]] = {
    "dpo-loss": ("dpo-loss",),
    "toy-dpo": ("dpo-loss",),
    "ppo-clip": ("ppo-clip",),
    "grpo-loss": ("ppo-clip",),
    "kl-estimators": ("kl-estimators",),
    "gae": ("gae-lambda",),
}

_LOCK = threading.Lock()


def _s(lang: str) -> dict[str, str]:
    return i18n.lang_table("practice.figures")[lang]


def _check(name: str, lang: str) -> None:
    if name not in NAMES:
        raise ValueError(f"name: expected one of {NAMES}, got {name!r}")
    if lang not in i18n.LANGS:
        raise ValueError(f"lang: expected one of {i18n.LANGS}, got {lang!r}")


def for_exercise(exercise_id: str) -> tuple[str, ...]:
    """The pictures shown with an exercise (none for most)."""
    return EXERCISE_FIGURES.get(exercise_id, ())


# -- the numbers -------------------------------------------------------------------------------
def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)  # log σ(x), stable for large |x|


def dpo_curves(margins: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """(loss, weight) per margin Δ = (log π(y_w) - log π_ref(y_w)) - (log π(y_l) - log π_ref(y_l)):
    loss = -log σ(βΔ); weight = σ(-βΔ) = -(1/β) dloss/dΔ."""
    z = beta * np.asarray(margins, dtype=np.float64)
    return -_log_sigmoid(z), np.exp(_log_sigmoid(-z))


def ppo_objective(ratio: np.ndarray, advantage: float, eps: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """(objective, gradient wrt ρ) of min(ρA, clip(ρ, 1-ε, 1+ε)A): the clipped side has gradient 0."""
    r = np.asarray(ratio, dtype=np.float64)
    unclipped, clipped = r * advantage, np.clip(r, 1 - eps, 1 + eps) * advantage
    objective = np.minimum(unclipped, clipped)
    inside = (r > 1 - eps) & (r < 1 + eps)
    grad = np.where((unclipped <= clipped) | inside, advantage, 0.0)
    return objective, grad


def kl_estimators(log_ratio: np.ndarray) -> dict[str, np.ndarray]:
    """k1 = -log r, k2 = (log r)²/2, k3 = r - 1 - log r, for log r = log π_ref - log π_θ."""
    x = np.asarray(log_ratio, dtype=np.float64)
    return {"k1": -x, "k2": 0.5 * x * x, "k3": np.expm1(x) - x}


def kl_estimator_stats(mus: np.ndarray, n: int = 200_000, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Bias and standard deviation of k1, k2, k3 as estimators of KL(q || p) for q = N(0, 1) (the
    policy, sampled) and p = N(μ, 1) (the reference): true KL = μ²/2. ``{"k1": {"bias", "std"}...}``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    out: dict[str, dict[str, list[float]]] = {k: {"bias": [], "std": []} for k in ("k1", "k2", "k3")}
    for mu in mus:
        log_ratio = -0.5 * (x - mu) ** 2 + 0.5 * x**2  # log p(x) - log q(x)
        true = 0.5 * mu * mu
        for k, v in kl_estimators(log_ratio).items():
            out[k]["bias"].append(float(v.mean() - true))
            out[k]["std"].append(float(v.std()))
    return {k: {s: np.array(v) for s, v in d.items()} for k, d in out.items()}


def gae(rewards: np.ndarray, values: np.ndarray, *, gamma: float = 1.0, lam: float = 0.95) -> np.ndarray:
    """Advantages [B, T] by the reverse scan δ_t = r_t + γV_{t+1} - V_t, A_t = δ_t + γλA_{t+1},
    with V = A = 0 after the last token (the episode ends there)."""
    r, v = np.atleast_2d(rewards).astype(np.float64), np.atleast_2d(values).astype(np.float64)
    adv = np.zeros_like(r)
    nxt_v = np.zeros(r.shape[0])
    nxt_a = np.zeros(r.shape[0])
    for t in range(r.shape[1] - 1, -1, -1):
        delta = r[:, t] + gamma * nxt_v - v[:, t]
        nxt_a = delta + gamma * lam * nxt_a
        adv[:, t] = nxt_a
        nxt_v = v[:, t]
    return adv


@dataclass(frozen=True)
class GAESetup:
    """The sample task: T tokens, a noisy reward only at the end (mean 1), small per-token noise
    (a KL-shaped reward), and a critic that overestimates every state after the first by ``critic_error``."""

    T: int = 10
    final_reward_std: float = 1.0
    step_reward_std: float = 0.3
    critic_error: float = 0.4

    def values(self) -> np.ndarray:
        v = np.ones(self.T)  # the true value of every state: the expected final reward
        v[1:] += self.critic_error
        return v

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        r = rng.normal(0.0, self.step_reward_std, size=(n, self.T))
        r[:, -1] = rng.normal(1.0, self.final_reward_std, size=n)
        return r


#: trajectories in the batch whose mean advantage the picture's dotted curve shows (a batch divides the
#: variance by its size and leaves the bias: why bias² and variance are not simply added)
GAE_BATCH = 64


def gae_tradeoff(lams: np.ndarray, setup: GAESetup = GAESetup(), n: int = 20_000, seed: int = 0
                 ) -> dict[str, np.ndarray]:
    """Bias² and variance of the estimate Â_0 against λ. The target is E[G_0] - V_0 (the critic's own
    baseline does not bias a policy gradient), which λ = 1 estimates without bias."""
    rng = np.random.default_rng(seed)
    rewards, values = setup.sample(n, rng), setup.values()
    target = 1.0 - values[0]
    bias2, var = [], []
    for lam in lams:
        a0 = gae(rewards, np.broadcast_to(values, rewards.shape), lam=float(lam))[:, 0]
        bias2.append(float((a0.mean() - target) ** 2))
        var.append(float(a0.var()))
    return {"lam": np.asarray(lams, dtype=np.float64), "bias2": np.array(bias2), "var": np.array(var)}


# -- the text version (terminal, and the page's "same as text") --------------------------------
def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


@lru_cache(maxsize=16)
def text(name: str, lang: str = "en") -> str:
    """The picture's content as text: a few rows of its numbers and what to see in them."""
    _check(name, lang)
    s = _s(lang)
    if name == "dpo-loss":
        margins = np.array([-20.0, -10, -5, 0, 5, 10, 20])
        rows = []
        for m in margins:
            l1, w1 = dpo_curves(np.array([m]), 0.1)
            l5, w5 = dpo_curves(np.array([m]), 0.5)
            rows.append([f"{m:g}", f"{l1[0]:.3f}", f"{w1[0]:.3f}", f"{l5[0]:.3f}", f"{w5[0]:.3f}"])
        body = _table([s["margin"], "loss β=0.1", "σ(-βΔ) β=0.1", "loss β=0.5", "σ(-βΔ) β=0.5"], rows)
    elif name == "ppo-clip":
        ratios = np.array([0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5])
        rows = []
        for r in ratios:
            op, gp = ppo_objective(np.array([r]), 1.0)
            on, gn = ppo_objective(np.array([r]), -1.0)
            rows.append([f"{r:g}", f"{op[0]:.2f}", f"{gp[0]:g}", f"{on[0]:.2f}", f"{gn[0]:g}"])
        body = _table(["ρ", "A=+1", "d/dρ", "A=-1", "d/dρ"], rows)
    elif name == "kl-estimators":
        xs = np.array([-2.0, -1, -0.5, 0, 0.5, 1, 2])
        k = kl_estimators(xs)
        rows = [[f"{x:g}"] + [f"{round(k[e][i], 3) + 0.0:.3f}" for e in ("k1", "k2", "k3")] for i, x in enumerate(xs)]  # no -0.000
        body = _table(["log r", "k1", "k2", "k3"], rows)
        mus = np.array([0.1, 0.5, 1.0, 2.0])
        st = kl_estimator_stats(mus)
        rows2 = [[f"{mu:g}", f"{0.5 * mu * mu:.3f}"] + [f"{round(st[e]['bias'][i], 3) + 0.0:+.3f} / {st[e]['std'][i]:.3f}"
                                                        for e in ("k1", "k2", "k3")] for i, mu in enumerate(mus)]
        body += "\n\n" + s["kl_stats_title"] + "\n" + _table(["μ", "KL", "k1 " + s["bias_std"], "k2 " + s["bias_std"],
                                                               "k3 " + s["bias_std"]], rows2)
    else:
        lams = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 1.0])
        tr = gae_tradeoff(lams)
        rows = [[f"{lam:g}", f"{tr['bias2'][i]:.3f}", f"{tr['var'][i]:.3f}", f"{tr['var'][i] / GAE_BATCH:.4f}"]
                for i, lam in enumerate(lams)]
        body = _table(["λ", s["bias2"], s["variance"], s["batch_variance"]], rows)
    return f"{s[name.replace('-', '_') + '_title']}\n\n{body}\n\n{s[name.replace('-', '_') + '_note']}\n"


def caption(name: str, lang: str = "en") -> str:
    """One sentence: what to look at in the picture (the image's alt text and caption)."""
    _check(name, lang)
    return _s(lang)[name.replace("-", "_") + "_note"]


def title(name: str, lang: str = "en") -> str:
    _check(name, lang)
    return _s(lang)[name.replace("-", "_") + "_title"]


# -- the SVG ----------------------------------------------------------------------------------
def _version() -> str:
    import matplotlib

    source = Path(__file__).read_bytes()
    strings = repr(sorted(i18n.lang_table("practice.figures")["zh"].items())).encode()
    return hashlib.sha256(source + strings + matplotlib.__version__.encode()).hexdigest()[:16]


def _cache_dir() -> Path:
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return Path(home) / "cache" / "figures"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("alignlings")) / "figures"


@lru_cache(maxsize=16)
def svg(name: str, lang: str = "en", narrow: bool = False) -> str:
    """The picture as an SVG document (text kept as text: the browser's fonts draw Chinese).
    ``narrow``: the two panels one above the other, for a phone's width."""
    _check(name, lang)
    path = _cache_dir() / f"{name}-{lang}{'-narrow' if narrow else ''}-{_version()}.svg"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    with _LOCK:  # pyplot's state is global to the process
        out = _render(name, lang, narrow)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(out, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a re-render
    return out


COLORS = {"k1": "#2f6db5", "k2": "#d1495b", "k3": "#2e9e5b", "a": "#2f6db5", "b": "#d1495b"}


def _render(name: str, lang: str, narrow: bool = False) -> str:
    import warnings

    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    s = _s(lang)
    rc: dict = {"svg.fonttype": "none", "font.size": 10, "axes.spines.top": False, "axes.spines.right": False,
          "font.family": ["DejaVu Sans", "Noto Sans CJK SC", "WenQuanYi Micro Hei", "PingFang SC",
                          "Microsoft YaHei", "sans-serif"], "svg.hashsalt": "alignlings"}
    import logging

    font_log = logging.getLogger("matplotlib.font_manager")
    level = font_log.level
    font_log.setLevel(logging.ERROR)  # "findfont: not found" for the CJK names the browser will use
    try:
        with plt.rc_context(rc), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CJK glyphs are measured with DejaVu's metrics, drawn by the browser
            return _draw(plt, name, s, narrow)
    finally:
        font_log.setLevel(level)


def _draw(plt, name: str, s: dict[str, str], narrow: bool = False) -> str:
    # side by side on a screen; one above the other on a phone, where both stay readable
    layout = {"nrows": 2, "ncols": 1, "figsize": (4.6, 6.6)} if narrow else {"nrows": 1, "ncols": 2, "figsize": (8.4, 3.3)}
    if name == "dpo-loss":
        fig, (ax1, ax2) = plt.subplots(**layout)
        d = np.linspace(-30, 30, 301)
        for beta, color in ((0.1, COLORS["a"]), (0.5, COLORS["b"])):
            loss, weight = dpo_curves(d, beta)
            ax1.plot(d, loss, color=color, label=f"β = {beta}")
            ax2.plot(d, weight, color=color, label=f"β = {beta}")
        ax1.axhline(np.log(2), color="#999", ls=":", lw=1)
        ax1.annotate("log 2", (d[0], np.log(2)), textcoords="offset points", xytext=(2, 4), color="#666", fontsize=8)
        ax1.set(xlabel=s["margin"], ylabel=s["loss"], title=s["dpo_loss_left"])
        ax2.set(xlabel=s["margin"], ylabel="σ(−βΔ)", title=s["dpo_loss_right"], ylim=(0, 1.02))
        ax1.legend(frameon=False)
        ax2.legend(frameon=False)
    elif name == "ppo-clip":
        fig, axes = plt.subplots(**layout)
        r = np.linspace(0.0, 2.0, 401)
        eps = 0.2
        for ax, adv, key in ((axes[0], 1.0, "ppo_pos"), (axes[1], -1.0, "ppo_neg")):
            obj, grad = ppo_objective(r, adv, eps)
            ax.plot(r, r * adv, color="#bbb", ls="--", lw=1, label=s["unclipped"])
            ax.plot(r, obj, color=COLORS["a"], lw=2, label=s["clipped_objective"])
            flat = grad == 0
            ax.fill_between(r, obj.min() - 0.1, obj.max() + 0.1, where=flat, color="#f2c94c", alpha=0.35,
                            label=s["no_gradient"], step="mid")
            for x in (1 - eps, 1 + eps):
                ax.axvline(x, color="#999", lw=0.8, ls=":")
            ax.axvline(1.0, color="#666", lw=0.8)
            ax.set(xlabel="ρ = π_θ / π_old", ylabel=s["objective"], title=s[key])
        axes[0].legend(frameon=False, fontsize=8, loc="upper left")
    elif name == "kl-estimators":
        fig, (ax1, ax2) = plt.subplots(**layout)
        xs = np.linspace(-2, 2, 201)
        for k, v in kl_estimators(xs).items():
            ax1.plot(xs, v, color=COLORS[k], label=k)
        ax1.axhline(0, color="#999", lw=0.8)
        ax1.set(xlabel="log r = log π_ref − log π_θ", ylabel=s["estimate"], title=s["kl_left"])
        ax1.legend(frameon=False)
        mus = np.linspace(0.05, 2.0, 40)
        st = kl_estimator_stats(mus, n=50_000)
        true = 0.5 * mus**2
        for k in ("k1", "k2", "k3"):
            ax2.plot(mus, st[k]["std"] / true, color=COLORS[k], label=f"{k}: {s['std_rel']}")
            ax2.plot(mus, st[k]["bias"] / true, color=COLORS[k], ls="--", label=f"{k}: {s['bias_rel']}")
        ax2.set(xlabel=s["mu"], title=s["kl_right"], yscale="symlog", ylim=(-1.5, 60))
        ax2.legend(frameon=False, fontsize=7, ncol=2)
    else:
        fig, (ax1, ax2) = plt.subplots(**layout)
        setup = GAESetup()
        rewards = setup.sample(1, np.random.default_rng(3))
        t = np.arange(setup.T)
        for lam, color in ((0.0, "#d1495b"), (0.5, "#e08e0b"), (0.95, "#2e9e5b"), (1.0, "#2f6db5")):
            ax1.plot(t, gae(rewards, setup.values()[None, :], lam=lam)[0], marker="o", ms=3, color=color,
                     label=f"λ = {lam:g}")
        ax1.set(xlabel=s["token"], ylabel="Â_t", title=s["gae_left"])
        ax1.legend(frameon=False, fontsize=8)
        tr = gae_tradeoff(np.linspace(0, 1, 21))
        ax2.plot(tr["lam"], tr["bias2"], color="#d1495b", label=s["bias2"])
        ax2.plot(tr["lam"], tr["var"], color="#2f6db5", label=s["variance"])
        ax2.plot(tr["lam"], tr["var"] / GAE_BATCH, color="#2f6db5", ls=":", label=s["batch_variance"])
        ax2.set(xlabel="λ", title=s["gae_right"])
        ax2.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """``python -m alignlings.content.figures NAME [--lang zh] [--svg]``: the text version (default)
    or the SVG on stdout."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("name", choices=NAMES)
    ap.add_argument("--lang", default="en", choices=i18n.LANGS)
    ap.add_argument("--svg", action="store_true")
    args = ap.parse_args(argv)
    print(svg(args.name, args.lang) if args.svg else text(args.name, args.lang), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
