"""The courier: a node's terminal slot that carries an ask up unchanged and relays the verdict.

The design (`docs/design/contract.md` § Facts and judgment) composes a node's last judge as the person, a
fail-safe denial, or a courier. A courier
exercises no judgment: it carries the child's request bytes exactly as read (the facts, the
principal), appends this node to a hop list that is provenance only, and returns the verdict of the
node it carried the ask to as this node's response. Its transports (`Courier`, in `transport.py`)
are the one seam: another session's inbox under the same forwarding root (`session:ID`), or a NATS
JetStream broker (`nats://HOST:PORT`).

An approver serves a broker's asks: `broker_inbox` (the consumer loop) sends each parcel down the one
route through its door (`parcel_door`), unpacked off the event loop (`parcel_unpack`).

Plugs into serving's seams as an `Arbiter` (`core/vocabulary/asks.py`), beside the person and the
fail-safe denial; imports serving and below, never the person or the history.
"""
