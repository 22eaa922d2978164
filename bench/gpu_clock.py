"""The GPU's SM clock and power draw while a benchmark keeps it busy, from nvidia-smi sampling
every 100 ms beside the command. Under a sustained load an H200 reaches its power cap within
a fraction of a second and lowers its SM clock to stay under it (nvidia-smi's throttle
reason 0x4), so two setups compare only at the clocks they ran at: `make bench` reports
them with each row. Samples where the GPU was busy less than 80% of the time (compiling,
loading, launch gaps) are left out. power.draw is the driver's average over about a second,
so a run of a second or two reads below the cap while the throttle is on. Without
nvidia-smi, nothing is reported."""
import statistics
import subprocess

QUERY = "utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active"
SW_POWER_CAP = 0x4  # nvidia-smi's clocks_throttle_reasons.active bit for the power cap


class ClockSampler:
    def __init__(self, interval_ms=100):
        try:
            self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                          "-lms", str(interval_ms)], stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None

    def stop(self):
        """summarize() of what nvidia-smi printed while it ran"""
        if not self.proc:
            return {}
        self.proc.terminate()
        out, _ = self.proc.communicate()
        return summarize(out.splitlines())


def summarize(lines):
    """{"sm_clock_mhz", "power_w", "power_capped"} (medians, and the share of samples at the
    power cap) over the samples of nvidia-smi's QUERY lines with the GPU at least 80% busy;
    {} without any"""
    busy = []
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        try:
            util, clock, power, reasons = float(fields[0]), float(fields[1]), float(fields[2]), int(fields[3], 16)
        except (ValueError, IndexError):
            continue  # a partial last line, or [N/A] fields
        if util >= 80:
            busy.append((clock, power, reasons))
    if not busy:
        return {}
    return {"sm_clock_mhz": statistics.median(c for c, _, _ in busy),
            "power_w": statistics.median(p for _, p, _ in busy),
            "power_capped": sum(1 for _, _, r in busy if r & SW_POWER_CAP) / len(busy)}
