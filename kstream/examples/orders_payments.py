"""Orders joined with their payments: an interval join by order id.

    kstream run kstream.examples.orders_payments:job -p orders=orders \
        -p payments=payments -p output=paid [-p lower=0] [-p upper=60000]

Input: `inputs.orders_and_payments`. Output: ``{"key": order, "left":
order record, "right": payment record, "timestamp"}`` for every payment
with ``order.ts - lower <= payment.ts <= order.ts + upper``, each pair once
(`references.interval_join`). Too-late records of either side go to the
late topic with ``"side"``.
"""

from __future__ import annotations

from kstream import LATE, Job
from kstream.examples.event_time import key_of, late_sink, output_sink, source

#: The input generator's bound (`inputs.orders_and_payments`).
OUT_OF_ORDERNESS_MS = 5_000


def job(params: dict[str, str]) -> Job:
    """Parameters: `orders`, `payments`, `output`, optionally `late`, `name`, `lower`,
    `upper`, `ooo`, `idle`."""
    orders, payments = params.get("orders", "orders"), params.get("payments", "payments")
    j = Job(params.get("name", f"orders-payments-{orders}-{payments}"))
    paid = (
        j.source(source(orders, params, OUT_OF_ORDERNESS_MS))
        .key_by(key_of)
        .interval_join(
            j.source(source(payments, params, OUT_OF_ORDERNESS_MS)).key_by(key_of),
            int(params.get("lower", 0)),
            int(params.get("upper", 60_000)),
        )
    )
    paid.sink(output_sink(params, "paid"))
    paid.side_output(LATE).sink(late_sink(params, "paid"))
    return j
