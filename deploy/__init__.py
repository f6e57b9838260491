"""The files a host is installed from, shipped in the wheel as `advisor.deploy`: the agent's
unit (advisor-watch.service), the example settings and policy that `advisor install` writes
(advisor.fleet.install), the central store's fold unit and timer, and the Grafana dashboard
and Prometheus alert rules. No code."""

__all__: list[str] = []
