"""Interface strings of the web app in English and Chinese, and how a request picks its language.

Exercise texts come from the pack (texts/<lang>.toml); this table only holds the app's own
labels. The language is ``?lang=en|zh`` (which also sets the ``alignlings_lang`` cookie), else
the cookie, else English.
"""

from __future__ import annotations

from fastapi import Request

LANGS = ("en", "zh")
LANG_COOKIE = "alignlings_lang"

UI: dict[str, dict[str, str]] = {
    "app_title": {"en": "alignlings", "zh": "alignlings"},
    "tagline": {"en": "Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference.",
                "zh": "通过填空练习 DPO、GRPO 和奖励模型，并与经过验证的参考实现对比评分。"},
    "nav_home": {"en": "Exercises", "zh": "练习"},
    "nav_quiz": {"en": "Quiz", "zh": "测验"},
    "nav_cloze": {"en": "MLM drill", "zh": "随机填空"},
    "nav_toy": {"en": "Toy GRPO", "zh": "玩具 GRPO"},
    "nav_progress": {"en": "Progress", "zh": "进度"},
    "next_up": {"en": "Next up", "zh": "下一个"},
    "all_done": {"en": "Every exercise is solved. Drill the reference code in the MLM drill.",
                 "zh": "所有练习都已完成。去随机填空里再练练参考代码吧。"},
    "start": {"en": "Start", "zh": "开始"},
    "level": {"en": "level", "zh": "难度"},
    "solved": {"en": "solved", "zh": "已完成"},
    "todo": {"en": "to do", "zh": "未完成"},
    "attempts": {"en": "attempts", "zh": "尝试次数"},
    "hints": {"en": "hints", "zh": "提示"},
    "revealed": {"en": "solution seen", "zh": "看过答案"},
    "quiz_kind": {"en": "quiz", "zh": "测验"},
    "code_kind": {"en": "code", "zh": "代码"},
    "drills": {"en": "MLM drills", "zh": "随机填空"},
    "drills_intro": {"en": "Reference snippets with random tokens masked; each refresh draws new masks.",
                     "zh": "参考代码中随机遮住一些 token；每次刷新都会重新抽取。"},
    "check": {"en": "Check", "zh": "检查"},
    "checking": {"en": "Checking…", "zh": "检查中…"},
    "check_keys": {"en": "Ctrl+Enter checks · Tab moves to the next blank",
                   "zh": "Ctrl+Enter 检查 · Tab 跳到下一个空"},
    "hint": {"en": "Hint", "zh": "提示"},
    "hints_title": {"en": "Hints", "zh": "提示"},
    "kind_visible": {"en": "visible", "zh": "可见"},
    "kind_hidden": {"en": "hidden", "zh": "隐藏"},
    "kind_edge": {"en": "edge case", "zh": "边界情况"},
    "expected_got": {"en": "expected {expected}, got {got}", "zh": "期望 {expected}，实际 {got}"},
    "next_hint": {"en": "Show a hint", "zh": "看一条提示"},
    "no_more_hints": {"en": "No more hints: reveal the answer if you are stuck.",
                      "zh": "没有更多提示了：卡住的话可以查看答案。"},
    "reveal": {"en": "Reveal the answer", "zh": "查看答案"},
    "reveal_confirm": {"en": "Reveal the reference answer? Your progress records that you looked.",
                       "zh": "要查看参考答案吗？进度中会记录你看过答案。"},
    "answer": {"en": "Reference answer", "zh": "参考答案"},
    "why": {"en": "Why it is right", "zh": "为什么这样写"},
    "passed": {"en": "Passed: every case matches the reference.", "zh": "通过：所有用例都与参考实现一致。"},
    "failed": {"en": "Not yet: see the marks beside the blanks and the cases below.",
               "zh": "还没通过：请看空格旁的标记和下面的用例。"},
    "cases": {"en": "Cases", "zh": "用例"},
    "output": {"en": "Output of running your file", "zh": "运行你的文件的输出"},
    "error": {"en": "Error", "zh": "错误"},
    "busy": {"en": "The grader is busy; try again in a moment.", "zh": "评分器正忙，请稍后再试。"},
    "busy_retrying": {"en": "Queued…", "zh": "排队中…"},
    "network": {"en": "Could not reach the server.", "zh": "无法连接服务器。"},
    "statement": {"en": "Task", "zh": "任务"},
    "code": {"en": "Code", "zh": "代码"},
    "question": {"en": "Question {n} of {total}", "zh": "第 {n} 题，共 {total} 题"},
    "right": {"en": "Right!", "zh": "答对了！"},
    "wrong": {"en": "Not quite.", "zh": "不对。"},
    "next_question": {"en": "Next question", "zh": "下一题"},
    "prev_question": {"en": "Previous", "zh": "上一题"},
    "quiz_done": {"en": "Quiz finished: {right}/{total} right.", "zh": "测验完成：答对 {right}/{total}。"},
    "refresh": {"en": "Refresh masks", "zh": "换一批"},
    "ratio": {"en": "Masked fraction", "zh": "遮住比例"},
    "cloze_score": {"en": "{right}/{total} right", "zh": "答对 {right}/{total}"},
    "cloze_pick": {"en": "Pick a snippet", "zh": "选择片段"},
    "run": {"en": "Run", "zh": "运行"},
    "seed": {"en": "seed", "zh": "随机种子"},
    "iterations": {"en": "iterations", "zh": "迭代次数"},
    "toy_intro": {
        "en": 'A one-layer GPT-2 learns to answer &lt;bos&gt; with "a" (reward 1, else 0) by GRPO: groups of 32 '
              "samples, z-scored rewards, clipped surrogate with a k3 KL penalty. It trains here, in the server, "
              "and streams P(\"a\") and the loss after each iteration. Run again with another seed to overlay "
              "the curves.",
        "zh": "一个单层 GPT-2 通过 GRPO 学会用 “a” 回答 &lt;bos&gt;（回答 a 奖励为 1，否则为 0）：每组采样 32 个，"
              "组内 z-score 奖励，带 k3 KL 惩罚的截断代理目标。训练就在服务器中进行，每次迭代后实时推送 "
              "P(\"a\") 和损失。换一个种子再运行，曲线会叠加显示。"},
    "clear_runs": {"en": "Clear", "zh": "清除"},
    "preparing": {"en": "loading torch and transformers (first run only)…", "zh": "正在加载 torch 和 transformers（仅首次运行）…"},
    "p_target": {"en": 'P("a")', "zh": 'P("a")'},
    "loss": {"en": "loss", "zh": "损失"},
    "iteration": {"en": "iteration", "zh": "迭代"},
    "running": {"en": "training…", "zh": "训练中…"},
    "run_done": {"en": "seed {seed}: P(\"a\") {p0} → {p1} in {n} iterations",
                 "zh": "种子 {seed}：{n} 次迭代后 P(\"a\") 从 {p0} 变为 {p1}"},
    "export": {"en": "Export (JSON)", "zh": "导出（JSON）"},
    "import": {"en": "Import", "zh": "导入"},
    "import_done": {"en": "Imported.", "zh": "已导入。"},
    "quiz_answers": {"en": "Quiz answers", "zh": "测验作答"},
    "cloze_stats": {"en": "MLM drill", "zh": "随机填空"},
    "none_yet": {"en": "nothing yet", "zh": "还没有"},
    "store_at": {"en": "Stored in {path}", "zh": "保存在 {path}"},
    "not_found": {"en": "Not found", "zh": "未找到"},
    "go_home": {"en": "Back to the exercises", "zh": "回到练习列表"},
    "language": {"en": "中文", "zh": "English"},
    "language_label": {"en": "Switch to Chinese", "zh": "切换到英文"},
    "colon": {"en": ": ", "zh": "："},
    "skip_to_main": {"en": "Skip to the content", "zh": "跳到正文"},
    "skip_to_code": {"en": "Skip to the code", "zh": "跳到代码"},
    "main_nav": {"en": "Main", "zh": "主导航"},
    "prev_exercise": {"en": "Previous exercise", "zh": "上一个练习"},
    "next_exercise": {"en": "Next exercise", "zh": "下一个练习"},
    "blank_hint_label": {"en": "Hint for TODO {n}", "zh": "TODO {n} 的提示"},
    "first_failing": {"en": "First failing case", "zh": "第一个未通过的用例"},
    "show_all_cases": {"en": "Show all {n} cases", "zh": "显示全部 {n} 个用例"},
    "hide_cases": {"en": "Show only the first failing case", "zh": "只显示第一个未通过的用例"},
    "cases_passed": {"en": "{right} of {total} cases pass", "zh": "{total} 个用例中通过 {right} 个"},
    "whats_wrong": {"en": "What is wrong", "zh": "问题所在"},
    "cloze_suggest": {"en": "After the fixed fill-in above, practise the same code with random blanks in the",
                      "zh": "完成上面的固定填空后，可以在这里用随机填空再练一遍同样的代码："},
    "reveal_ask": {"en": "Show the reference answer for every TODO? Your progress will record that you looked.",
                   "zh": "要显示每个 TODO 的参考答案吗？进度中会记录你看过答案。"},
    "reveal_yes": {"en": "Yes, show the answer", "zh": "显示答案"},
    "cancel": {"en": "Cancel", "zh": "取消"},
    "last_attempt": {"en": "Marks of your last check", "zh": "上次检查的结果"},
    "quiz_rule": {"en": "The quiz counts as solved when your latest answer to every question is right.",
                  "zh": "每道题的最新作答都正确，测验才算完成。"},
    "retake": {"en": "Retake the quiz", "zh": "重新测验"},
    "quiz_progress": {"en": "{answered} of {total} answered, {right} right.", "zh": "已答 {answered}/{total} 题，答对 {right} 题。"},
    "quiz_passed": {"en": "Solved: every answer is right.", "zh": "已完成：每道题都答对了。"},
    "your_answer": {"en": "Your answer", "zh": "你的答案"},
    "mask_label": {"en": "Blank {n} of {total}, line {line}: {context}", "zh": "第 {n} 个空（共 {total} 个），第 {line} 行：{context}"},
    "cloze_gate_title": {"en": "This drill shows the solution", "zh": "这个练习会显示答案"},
    "cloze_gate": {"en": "The drill masks random tokens of the reference solution of “{title}”, which you have not "
                         "solved yet: the rest of the solution is in plain sight. Opening it counts as “solution seen” "
                         "in your progress.",
                   "zh": "随机填空遮住的是“{title}”参考答案中的随机 token，而这个练习你还没有完成：答案的其余部分会直接"
                         "显示出来。打开它会在进度中记为“看过答案”。"},
    "cloze_open": {"en": "Open the drill anyway", "zh": "仍然打开"},
    "cloze_solve_first": {"en": "Solve the exercise first", "zh": "先去完成练习"},
    "right_token": {"en": "the right token", "zh": "正确的 token"},
    "toy_empty": {"en": "No run yet: press Run to train the policy and draw its curve here.",
                  "zh": "还没有运行：点击“运行”开始训练，曲线会画在这里。"},
    "toy_target": {"en": "target 0.70", "zh": "目标 0.70"},
    "chart_p_desc": {"en": "P(\"a\") after each iteration, one curve per seed; the dashed line is the exercise's target 0.70.",
                     "zh": "每次迭代后的 P(\"a\")，每个种子一条曲线；虚线是练习要求的目标 0.70。"},
    "chart_loss_desc": {"en": "The GRPO loss after each iteration, one curve per seed.",
                        "zh": "每次迭代后的 GRPO 损失，每个种子一条曲线。"},
    "import_file": {"en": "Import a JSON export", "zh": "导入 JSON 导出文件"},
    "level_n": {"en": "level {n}", "zh": "难度 {n}"},
    "shape": {"en": "shape", "zh": "形状"},
}


def resolve_lang(request: Request) -> str:
    lang = request.query_params.get("lang")
    if lang in LANGS:
        return lang
    lang = request.cookies.get(LANG_COOKIE)
    return lang if lang in LANGS else "en"


# Keys are read as attributes in templates (``t.check``): never name one like a dict method.
assert not set(UI) & set(dir(dict)), "UI keys must not shadow dict methods"


def ui(lang: str) -> dict[str, str]:
    """The interface strings in one language (for templates and for the page's scripts)."""
    return {key: value.get(lang) or value["en"] for key, value in UI.items()}
