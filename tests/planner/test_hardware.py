import pytest

from trainclock.errors import DataError, UsageError
from trainclock.planner.model.hardware import by_alias, find, load_catalogue, parse_catalogue

GOOD = """
[my-gpu]
name = "My GPU"
peak_tflops = { bf16 = 400, fp8 = 800 }
memory_gb = 96
memory_bandwidth_gb_per_s = 3000
accelerators_per_node = 4
intra_node_gb_per_s = 300
inter_node_gb_per_s = 25
"""


def test_builtin_catalogue_has_the_issue_accelerators_with_datasheet_figures(catalogue):
    assert {"h100-sxm", "h200", "a100-80gb", "gaudi2", "tpu-v5e"} <= set(catalogue)
    h100 = catalogue["h100-sxm"]
    assert h100.peak("bf16") == pytest.approx(989.4e12)
    assert h100.peak("fp8") == pytest.approx(2 * 989.4e12, rel=1e-3)
    assert (h100.memory_bytes, h100.accelerators_per_node, h100.inter_node_bandwidth) == (80e9, 8, 50e9)
    assert catalogue["h200"].like == "h100-sxm" and catalogue["h200"].memory_bytes == 141e9
    assert catalogue["tpu-v5e"].power_watts is None  # optional field left out


def test_mlperf_names_map_to_catalogue_entries(catalogue):
    assert by_alias(catalogue, "NVIDIA H100-SXM5-80GB").id == "h100-sxm"
    assert by_alias(catalogue, "Habana Gaudi2").id == by_alias(catalogue, "Intel Gaudi2").id == "gaudi2"


def test_user_file_adds_an_accelerator_with_units_converted(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    acc = load_catalogue([path])["my-gpu"]
    assert acc.peak_flops == {"fp8": 800e12, "bf16": 400e12}
    assert acc.intra_node_bandwidth == 300e9 and acc.inter_node_latency == pytest.approx(8e-6)  # default latency


def test_missing_precision_is_a_usage_error_naming_the_fix(catalogue):
    with pytest.raises(UsageError, match="a100-80gb has no fp8 peak.*precision="):
        catalogue["a100-80gb"].peak("fp8")


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("memory_gb = 96\n", ""), r"\[my-gpu\] is missing memory_gb \(GB of memory per accelerator\); add it"),
    (lambda t: t.replace("memory_gb", "memroy_gb"), r"unknown field 'memroy_gb'"),
    (lambda t: t.replace("fp8 = 800", "fp8 = 200"), r"inconsistent: peak_tflops.fp8 \(200\) is below peak_tflops.bf16 \(400\)"),
    (lambda t: t.replace("intra_node_gb_per_s = 300", "intra_node_gb_per_s = 0"), r"inconsistent: accelerators_per_node is 4"),
    (lambda t: t.replace("memory_gb = 96", 'memory_gb = "96"'), r"memory_gb must be a positive number, got '96'"),
    (lambda t: t.replace("accelerators_per_node = 4", "accelerators_per_node = 2.5"), r"accelerators_per_node must be a whole number"),
    (lambda t: t.replace("bf16 = 400, ", "int4 = 9, "), r"unknown precision 'int4'"),
    (lambda t: t + 'like = "nothing"\n', r"like = 'nothing', which is not another accelerator"),
    (lambda t: t.replace("]\nname", "\nname"), r"not valid TOML"),
])
def test_bad_hardware_files_give_one_line_errors_naming_file_and_field(tmp_path, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(edit(GOOD))
    with pytest.raises(DataError, match=message) as info:
        load_catalogue([path])
    assert "\n" not in str(info.value)
    assert "bad.toml" in str(info.value) or "like" in str(info.value)


def test_missing_hardware_file_and_unknown_accelerator_are_usage_errors(tmp_path, catalogue):
    with pytest.raises(UsageError, match="hardware file .*nope.toml not found"):
        load_catalogue([tmp_path / "nope.toml"])
    with pytest.raises(UsageError, match="unknown accelerator 'h300'; choose one of: .*h100-sxm.*this-cpu.*--hardware"):
        find(catalogue, "h300")


def test_an_id_cannot_take_the_measured_cpus_name():
    with pytest.raises(DataError, match="this-cpu"):
        parse_catalogue(GOOD.replace("[my-gpu]", "[this-cpu]"), "x.toml")


def test_a_user_file_redefining_a_built_in_keeps_its_aliases_unless_it_gives_its_own(tmp_path):
    """A --hardware file that redefines h100-sxm (other peaks) used to leave the published
    results' "NVIDIA H100-SXM5-80GB" without an accelerator, failing every plan on it."""
    fields = ('name = "My H100"\npeak_tflops = { bf16 = 900.0 }\nmemory_gb = 80\nmemory_bandwidth_gb_per_s = 3000\n'
              'accelerators_per_node = 8\nintra_node_gb_per_s = 450\ninter_node_gb_per_s = 50\n')
    mine = tmp_path / "mine.toml"
    mine.write_text("[h100-sxm]\n" + fields)
    catalogue = load_catalogue([mine])
    assert by_alias(catalogue, "NVIDIA H100-SXM5-80GB").peak_flops["bf16"] == 900e12
    mine.write_text("[h100-sxm]\n" + fields + 'aliases = ["Lab H100"]\n')
    assert load_catalogue([mine])["h100-sxm"].aliases == ("Lab H100",)
