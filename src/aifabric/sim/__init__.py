"""Simulators of a scenario's transfers on its fabric: analytic (closed form), flow
(max-min fair rates) and packet (queues, PFC, ECN, congestion control), with the results
they share (:mod:`aifabric.sim.run` runs one). Nothing is imported here: each module
imports what it needs on first use."""
