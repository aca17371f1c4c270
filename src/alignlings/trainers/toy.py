"""A verifiable task small enough for a laptop CPU: two-digit addition with a tiny GPT-2.

Everything is built in code, nothing is downloaded:

* a character-level tokenizer (a ``PreTrainedTokenizerFast`` over ``0-9 + =`` plus <pad> and
  <eos>), so the trainers see an ordinary transformers tokenizer;
* a 2-layer, 64-wide GPT-2 (about 0.1 M parameters) without dropout;
* prompts ``"a+b="`` for a, b in 0..99 with the completion ``str(a + b)``; 500 pairs are held out
  and never trained on; ``exact_match_reward`` is the checker (1.0 for exactly the right digits);
* ``warm_up``: a short supervised phase (cross-entropy on the answer tokens only) on answers written
  by a sloppy teacher (``teacher_rows``) who forgets the carry on ``FORGET_CARRY`` of the problems
  that have one. The model copies the habit and ends clearly imperfect, with the right answer
  still likely enough to be sampled: the alignment trainers have something to fix, and a signal.

Accuracy is greedy decoding, exact match, on the held-out prompts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from alignlings.trainers.data import collate_completions, left_pad_prompts, tokenize_pair, tokenize_prompt
from alignlings.trainers.modeling import lm_logits

CHARS = "0123456789+="
PAD, EOS = "<pad>", "<eos>"
#: held-out prompts, never seen in warm-up, reward-model, DPO or GRPO training
NUM_HELDOUT = 500
#: how often the warm-up teacher forgets a carry (on problems that have one)
FORGET_CARRY = 0.6


def make_tokenizer():
    """A character-level ``PreTrainedTokenizerFast``: ids 0 <pad>, 1 <eos>, then one per character."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate([PAD, EOS, *CHARS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=PAD))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=PAD, eos_token=EOS)


def make_model(tokenizer, *, n_layer: int = 2, n_embd: int = 64, n_head: int = 4, n_positions: int = 16,
               seed: int = 0):
    """A randomly initialised tiny GPT-2 for ``tokenizer`` (dropout 0; 16 positions fit the task)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config)


def addition_rows(seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(train, held-out) rows ``{"prompt": "a+b=", "answer": "a+b"}`` over all 10,000 pairs."""
    pairs = [(a, b) for a in range(100) for b in range(100)]
    random.Random(seed).shuffle(pairs)
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in pairs]
    return rows[NUM_HELDOUT:], rows[:NUM_HELDOUT]


def has_carry(a: int, b: int) -> bool:
    """True when a + b carries out of the units or the tens column."""
    return a % 10 + b % 10 >= 10 or a + b >= 100


def carry_dropped(a: int, b: int) -> str:
    """The sloppy teacher's answer: each column summed mod 10, every carry forgotten (47+38 -> "75")."""
    return str((a % 10 + b % 10) % 10 + 10 * ((a // 10 + b // 10) % 10))


def teacher_rows(rows: list[dict], forget_carry: float, seed: int = 0) -> list[dict]:
    """Warm-up data from a sloppy teacher: on problems with a carry it forgets the carry with
    probability ``forget_carry`` and writes ``carry_dropped``. ``answer`` stays the true sum;
    ``completion`` is what the teacher wrote."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        a, b = (int(x) for x in row["prompt"][:-1].split("+"))
        sloppy = has_carry(a, b) and rng.random() < forget_carry
        out.append({**row, "completion": carry_dropped(a, b) if sloppy else row["answer"]})
    return out


def exact_match_reward(prompts, completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion is exactly the sum's digits, else 0.0 (a TRL-style reward function)."""
    return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]


@torch.no_grad()
def generate_answers(model, tokenizer, prompts: list[str], *, do_sample: bool = False, temperature: float = 1.0,
                     num_return_sequences: int = 1, batch_size: int = 512, max_new_tokens: int = 4) -> list[str]:
    """Decoded completions (greedy by default), ``num_return_sequences`` per prompt, adjacent."""
    was_training = model.training
    model.eval()
    out: list[str] = []
    device = next(model.parameters()).device
    for i in range(0, len(prompts), batch_size):
        ids = [tokenize_prompt(tokenizer, p) for p in prompts[i:i + batch_size] for _ in range(num_return_sequences)]
        prompt_ids, prompt_mask = left_pad_prompts(ids, tokenizer.pad_token_id)
        generated = model.generate(
            input_ids=prompt_ids.to(device), attention_mask=prompt_mask.to(device), do_sample=do_sample,
            temperature=temperature if do_sample else None, top_k=None, top_p=None, max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        )
        out += tokenizer.batch_decode(generated[:, prompt_ids.shape[1]:], skip_special_tokens=True)
    model.train(was_training)
    return out


def accuracy(model, tokenizer, rows: list[dict]) -> float:
    """Greedy exact-match accuracy on ``rows``."""
    answers = generate_answers(model, tokenizer, [r["prompt"] for r in rows])
    return sum(exact_match_reward(None, answers, [r["answer"] for r in rows])) / len(rows)


@dataclass
class WarmUp:
    """Supervised warm-up: AdamW on the answer tokens' cross-entropy, a fixed number of steps."""

    steps: int = 1000
    batch_size: int = 64
    learning_rate: float = 3e-3
    #: linear decay of the learning rate to 0 over ``steps`` (a settled model, not a snapshot mid-jump)
    decay: bool = True
    seed: int = 0


def warm_up(model, tokenizer, rows: list[dict], cfg: WarmUp = WarmUp(), *, progress: bool = False) -> list[float]:
    """Train ``model`` in place on prompt -> ``completion`` (or ``answer``); returns the loss per step."""
    from alignlings.trainers.metrics import Progress

    rng = random.Random(cfg.seed)
    pairs = [tokenize_pair(tokenizer, r["prompt"], r.get("completion", r["answer"])) for r in rows]
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    decay = (lambda step: 1.0 - step / cfg.steps) if cfg.decay else (lambda step: 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, decay)
    model.train()
    losses = []
    with torch.random.fork_rng(), Progress(cfg.steps, "warm-up", enabled=progress) as bar:
        torch.manual_seed(cfg.seed)
        for _ in range(cfg.steps):
            chosen = rng.sample(pairs, cfg.batch_size)
            batch = collate_completions([p for p, _ in chosen], [c for _, c in chosen], tokenizer.pad_token_id)
            logits = lm_logits(model, batch["input_ids"], batch["attention_mask"])  # [B, T, V]
            labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)  # answer tokens only
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())  # mean NLL
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            bar.update({"loss": losses[-1]})
    return losses


def warm_model(seed: int = 0, cfg: WarmUp | None = None, *, forget_carry: float = FORGET_CARRY,
               progress: bool = False, **model_kwargs):
    """(tokenizer, warmed-up model, train rows, held-out rows): the demo's warm-up stage."""
    tokenizer = make_tokenizer()
    model = make_model(tokenizer, seed=seed, **model_kwargs)
    train, heldout = addition_rows(seed)
    warm_up(model, tokenizer, teacher_rows(train, forget_carry, seed), cfg or WarmUp(seed=seed), progress=progress)
    return tokenizer, model, train, heldout


def preference_pairs(model, tokenizer, rows: list[dict], *, num_samples: int = 8, temperature: float = 1.0,
                     seed: int = 0) -> list[dict]:
    """DPO / reward-model pairs sampled from ``model``: a correct sample as ``chosen``, the most frequent
    incorrect one (the model's typical mistake) as ``rejected``; prompts whose samples are all right or
    all wrong give no pair."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        samples = generate_answers(model, tokenizer, [r["prompt"] for r in rows], do_sample=True,
                                   temperature=temperature, num_return_sequences=num_samples)
    pairs = []
    for i, row in enumerate(rows):
        group = samples[i * num_samples:(i + 1) * num_samples]
        wrong = [s for s in group if s.strip() != row["answer"]]
        if wrong and len(wrong) < len(group):
            rejected = max(sorted(set(wrong)), key=wrong.count)  # most frequent; ties: smallest string
            pairs.append({"prompt": row["prompt"], "chosen": row["answer"], "rejected": rejected,
                          "answer": row["answer"]})
    return pairs
