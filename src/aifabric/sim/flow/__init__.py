"""The flow simulator: max-min fair rates of the transfers in flight, stage by stage
(:func:`aifabric.sim.flow.engine.run_flow`)."""
