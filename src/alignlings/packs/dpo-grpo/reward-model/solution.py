"""A reward model for RLHF: a frozen backbone with a trainable scalar value head.

It is trained on preference pairs with the Bradley-Terry loss (Ouyang et al., InstructGPT, 2022).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RewardModel(nn.Module):
    def __init__(self, backbone, hidden_dim):
        super().__init__()
        self.backbone = backbone  # BLANK
        # freeze the backbone: only the value head learns
        for param in self.backbone.parameters():
            param.requires_grad = False  # BLANK: stmt
        # one scalar score per sequence
        self.value_head = nn.Linear(hidden_dim, 1)  # BLANK

    def forward(self, input_ids):
        # input_ids [B, T] -> rewards [B]
        with torch.no_grad():
            hidden_states = self.backbone(input_ids)  # BLANK
        # [B, T, H]; in a causal transformer the last position has seen the whole sequence
        last_hidden = hidden_states[:, -1, :]  # BLANK
        reward = self.value_head(last_hidden).squeeze(-1)  # BLANK
        return reward

    def compute_preference_loss(self, reward_chosen, reward_rejected):
        # Bradley-Terry: P(chosen preferred to rejected) = sigmoid(r_chosen - r_rejected)
        loss = -F.logsigmoid(reward_chosen - reward_rejected).mean()  # BLANK
        return loss


if __name__ == "__main__":
    torch.manual_seed(42)
    vocab, hidden, B, T = 100, 64, 4, 10
    # a stand-in for a pretrained language model: token ids [B, T] -> hidden states [B, T, H]
    backbone = nn.Sequential(nn.Embedding(vocab, hidden), nn.Linear(hidden, hidden), nn.GELU())
    model = RewardModel(backbone, hidden)
    chosen_ids = torch.randint(0, vocab, (B, T))
    rejected_ids = torch.randint(0, vocab, (B, T))

    reward_chosen = model(chosen_ids)
    reward_rejected = model(rejected_ids)
    loss = model.compute_preference_loss(reward_chosen, reward_rejected)
    print(f"rewards (chosen):   {[round(r, 4) for r in reward_chosen.tolist()]}")
    print(f"rewards (rejected): {[round(r, 4) for r in reward_rejected.tolist()]}")
    print(f"preference loss: {loss.item():.6f}")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    print(f"trainable parameters: {trainable} of {total}")
