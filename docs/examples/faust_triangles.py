"""A Faust app with an ivmstream view counting triangles per graph (docs/faust.md).

Run it as any Faust app: ``python faust_triangles.py worker --web-port 6066``; then
``curl localhost:6066/ivmstream/triangles/social`` answers the latest count of graph ``social``."""

import os

import faust

from ivmstream.faust import attach

# Topics are created by their owners, not by the app (the embedded broker has no CreateTopics at all).
app = faust.App(
    os.environ.get("APP_ID", "graphs"),
    broker=os.environ.get("KAFKA_URL", "kafka://localhost:9092"),
    topic_allow_declare=False,
    topic_disable_leader=True,
)
edges = os.environ.get("EDGES_TOPIC", "edges")
attach(
    app,
    "triangles",
    {"mode": "graph", "key_field": "graph", "input_topic": edges, "output_topic": f"{edges}.triangles"},
)

if __name__ == "__main__":
    app.main()
