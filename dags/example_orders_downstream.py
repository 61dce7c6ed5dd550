"""Downstream of the orders topic: runs whenever ``example_orders_pipeline`` committed orders.

Scheduled on the Asset of the topic, ``pyconnect://pyconnect_default/orders``
(:func:`airflow_pyconnect.assets.pyconnect_asset`), which the source operator of the pipeline
updates after each run. Each Asset event's ``extra`` carries the committed ranges
(``{"connector", "topic", "ranges": {"<p>": [from, to]}, "records"}``), so this DAG reads exactly the
records that triggered it, from the same backend, without knowing anything about the pipeline.

``order_stats`` reads those records (``Backend.read_range``: committed records only) and returns the
number of orders, distinct customers and the order value per channel.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import dag, task

from airflow_pyconnect.assets import pyconnect_asset

ORDERS = pyconnect_asset("orders")


@dag(
    dag_id="example_orders_downstream",
    schedule=[ORDERS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["pyconnect", "example"],
    doc_md=__doc__,
)
def example_orders_downstream() -> None:
    @task
    def order_stats(triggering_asset_events: Any = None) -> dict[str, Any]:
        """Orders, customers and value per channel of the committed ranges that triggered this run."""
        import json
        from decimal import Decimal

        from airflow_pyconnect.hooks.pyconnect import PyConnectHook
        from connect_runtime.api.records import TopicPartition

        events = [e for evs in (triggering_asset_events or {}).values() for e in evs]
        orders = 0
        customers: set[str] = set()
        per_channel: dict[str, Decimal] = {}
        ranges_seen = []
        with PyConnectHook().get_backend() as backend:
            for event in events:
                extra = event.extra or {}
                topic = extra.get("topic")
                for p, (start, end) in (extra.get("ranges") or {}).items():
                    ranges_seen.append({"topic": topic, "partition": int(p), "from": start, "to": end})
                    for rec in backend.read_range(TopicPartition(topic, int(p)), start, end):
                        order = json.loads(rec.value) if rec.value else {}
                        orders += 1
                        customers.add(str(order.get("customer")))
                        channel = str(order.get("channel"))
                        per_channel[channel] = per_channel.get(channel, Decimal(0)) + Decimal(str(order.get("amount", 0)))
        stats = {"events": len(events), "ranges": ranges_seen, "orders": orders, "customers": len(customers),
                 "amount_per_channel": {c: str(v) for c, v in sorted(per_channel.items())}}
        print(f"order stats: {json.dumps(stats)}")
        return stats

    order_stats()


example_orders_downstream()
