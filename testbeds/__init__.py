"""Testbeds. Gymnasium environment ids are registered here, in one central place."""

try:  # gymnasium is optional for users who only run the controller
    from gymnasium.envs.registration import register as _register, registry as _gym_registry

    if "MAPFFrozenLake-v0" not in _gym_registry:
        _register(id="MAPFFrozenLake-v0",
                  entry_point="testbeds.mapf_frozenlake.env:MAPFFrozenLakeEnv")
except ImportError:  # pragma: no cover
    pass
