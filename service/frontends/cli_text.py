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
    },
}


def words(locale: str) -> dict[str, str]:
    """The labels for `locale`, English for any key it lacks."""
    return {**TEXT["en"], **TEXT.get(locale, {})}
