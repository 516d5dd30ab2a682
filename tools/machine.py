"""machine.py - what the training tools write in their logs about the machine they ran on."""


def cpu_name():
    """The CPU's model name as lscpu gives it (/proc/cpuinfo's "model name"), for a log."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU unknown"
