"""The control surface: representatives watching and operating networks (PROTOCOL.md 6), one module
per thing the tools touch, so each tool's Lambda imports only its own module's dependencies.

- :mod:`.grants`: grants and scope (which network a call acts in, what it may do), whoami,
  list_networks, use_network.
- :mod:`.observe`: network_status, list_agents, find_agents, list_blocked, get_history.
- :mod:`.graph`: get_graph (its Mermaid rendering is the client's, relaynet.mermaid).
- :mod:`.tasks`: list_tasks, task_status, delegate, cancel_task.
- :mod:`.messages`: get_thread, ask, reply, wake_agent.
- :mod:`.instances`: launch_agent and the two-step stop_agent / restart_agent.
- :mod:`.claims`: release_claim.
- :mod:`.conversation`: channel_send, channel_history (the representative's own conversation).
"""
