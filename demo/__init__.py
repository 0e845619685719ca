"""The demo model family: a small world model trained by this project on its procedural world
(world, trainer, evaluation). It imports the engine core; the core never imports it. A composition
root adds it to a model catalog with `demo.registration.register_demo`."""
