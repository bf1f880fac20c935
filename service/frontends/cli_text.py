"""The few words the `gpu-advisor` table prints around the server's own text, in the request's locale.

Everything else the CLI prints (the summary, the exclusion reasons) comes from the server, already in the
request's language; these are the column headers and labels of the table the CLI builds itself. A locale
without an entry reads English.
"""

from __future__ import annotations

TEXT: dict[str, dict[str, str]] = {
    "en": {
        "candidates": "Candidates:",
        "candidates_per_unit": "Candidates ($/unit = per {unit}):",
        "col.rank": "#",
        "col.gpu": "gpu",
        "col.count": "count",
        "col.score": "score",
        "col.usd_per_hour": "$/h",
        "col.usd_per_month": "$/month",
        "col.tier": "price tier",
        "col.usd_per_unit": "$/unit",
        "col.latency": "p95 ms",
        "col.latency_target": "p95 ms (target {target})",
        "col.days": "days",
        "col.days_target": "days (target {target})",
        "col.memory": "need/capacity GB",
        "per_copy": " per copy x{replicas}",
        "col.headroom": "headroom",
        "col.break_even": "break-even mo",
        "score_note": "score = 100 x the best cost per unit / this one's, plus rule points (`explain` shows the parts)",
        "tiers": "Prices compared at {tier}; * = no price in that tier, another tier's is used.",
        "month_hours": "$/month at {hours} h a month",
        # issue 25:
        "col.usd_per_run": "$/run",
        "run_total": "$/run = $/h x the run's days x 24",
        "not_shown": "Not shown (only the first {limit}): {count}: {gpus}",
        "no_candidates": "No GPU candidates.",
        "excluded": "Excluded:",
        "more_reasons": " (+{count} more)",
        "never": "never",
        "tier.ON_DEMAND": "on-demand",
        "tier.MARKETPLACE": "marketplace",
        "tier.RESERVED": "reserved",
        "tier.LIST_PURCHASE": "list purchase",
        "tier.SPOT": "spot",
        # issue 21:
        "col.needed": "needs",
        "col.where": "where (provider instance, region, tier)",
        "no_offer": "no offer in scope",
        "term": "{months} mo",
        # issue 43 (--plot, --chart):
        "plot.x": "x: {label}",
        "plot.y": "y: {label}",
        "plot.marks": "marked (|):",
        "plot.no_charts": "No chart to draw: the answer has no candidate with the figures a chart needs.",
        "plot.missing": "--plot needs plotext: pip install 'gpu-advisor[charts]'",
        "chart.missing": "--chart needs matplotlib: pip install 'gpu-advisor[charts]'",
        "chart.written": "Chart written to {path}",
        "chart.no_cjk_font": ("note: no CJK font found (install fonts-noto-cjk, or any Noto Sans CJK / Source Han Sans "
                              "/ WenQuanYi font); Chinese labels may show as boxes"),
        "api_row": "Model API: {provider} {model}, ${input:.3g}/${output:.3g} per 1M input/output tokens: "
                   "{per_unit} per {unit}, ${month:,.0f} a month for this load (the first candidate: "
                   "${self_month:,.0f}); {providers} provider(s) in scope, dearest {dearest} per {unit}",
    },
    "zh-CN": {
        "candidates": "候选配置：",
        "candidates_per_unit": "候选配置（每单位 $ = 每个{unit}）：",
        "col.rank": "#",
        "col.gpu": "GPU",
        "col.count": "数量",
        "col.score": "得分",
        "col.usd_per_hour": "每小时 $",
        "col.usd_per_month": "每月 $",
        "col.tier": "价格层级",
        "col.usd_per_unit": "每单位 $",
        "col.latency": "p95 毫秒",
        "col.latency_target": "p95 毫秒（目标 {target}）",
        "col.days": "天数",
        "col.days_target": "天数（目标 {target}）",
        "col.memory": "需求/容量 GB",
        "per_copy": "（每个副本）x{replicas}",
        "col.headroom": "余量",
        "col.break_even": "回本月数",
        "score_note": "得分 = 100 x 最低单位成本 / 本配置单位成本，加上规则分（`explain` 显示各部分）",
        "tiers": "以{tier}价格比较；* = 该层级无价格，使用了其他层级的价格。",
        "month_hours": "每月 $ 按每月 {hours} 小时计",
        # issue 25:
        "col.usd_per_run": "整次训练 $",
        "run_total": "整次训练 $ = 每小时 $ x 训练天数 x 24",
        "not_shown": "未显示（只显示前 {limit} 个）：{count} 个：{gpus}",
        "no_candidates": "没有 GPU 候选配置。",
        "excluded": "已排除：",
        "more_reasons": "（另有 {count} 条）",
        "never": "不会",
        "tier.ON_DEMAND": "按需",
        "tier.MARKETPLACE": "市场",
        "tier.RESERVED": "预留",
        "tier.LIST_PURCHASE": "标价购买",
        "tier.SPOT": "抢占式",
        # issue 21:
        "col.needed": "所需",
        "col.where": "租用位置（提供商 实例，区域，层级）",
        "no_offer": "范围内无报价",
        "term": "{months} 个月",
        # issue 43 (--plot, --chart):
        "plot.x": "横轴：{label}",
        "plot.y": "纵轴：{label}",
        "plot.marks": "标记（|）：",
        "plot.no_charts": "没有可画的图表：答案中没有带图表所需数据的候选配置。",
        "plot.missing": "--plot 需要 plotext：pip install 'gpu-advisor[charts]'",
        "chart.missing": "--chart 需要 matplotlib：pip install 'gpu-advisor[charts]'",
        "chart.written": "图表已写入 {path}",
        "chart.no_cjk_font": ("注意：未找到中日韩字体（请安装 fonts-noto-cjk，或任一 Noto Sans CJK / "
                              "思源黑体 / 文泉驿字体）；中文标签可能显示为方框"),
        "api_row": "模型 API：{provider} {model}，每 1M 输入/输出 token ${input:.3g}/${output:.3g}："
                   "每{unit} {per_unit}，按这个负载每月 ${month:,.0f}（首选候选：${self_month:,.0f}）；"
                   "范围内 {providers} 家提供商，最贵每{unit} {dearest}",
    },
}


def words(locale: str) -> dict[str, str]:
    """The labels for `locale`, English for any key it lacks."""
    return {**TEXT["en"], **TEXT.get(locale, {})}
