"""scripts/ncu_step_kernels.py on a CSV in Nsight Compute's layout: units, the step's period,
kernel names, refusals."""
import ncu_step_kernels as nsk

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"\n')


def _csv(tmp_path, rows):
    lines = ["==PROF== Connected to process 1\n", HEADER]
    for i, (name, unit, value) in enumerate(rows):
        lines.append(f'"{i}","1","ridgeline","h","{name}","1","13","(512, 1, 1)","(1, 1, 1)",'
                     f'"0","9.0","Command line profiler metrics","gpu__time_duration.sum",'
                     f'"{unit}","{value}"\n')
    path = tmp_path / "ncu.csv"
    path.write_text("".join(lines))
    return path


NORM = "void ridgeline::<unnamed>::norm_kernel<__nv_bfloat16, 8, 0, 0>(const T1 *, long)"
GEMV = "void ridgeline::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, 1, 1>(const T1 *)"
ADD = "void ridgeline::<unnamed>::map_kernel<__nv_bfloat16, 8, ridgeline::<unnamed>::Add>(T3)"


def test_names_units_and_period(tmp_path, capsys):
    # Set-up kernels, then three replays of a three-kernel step; the last replay is slower.
    step = [(NORM, "ns", "3,000"), (GEMV, "us", "17.5"), (ADD, "ns", "2,000")]
    last = [(NORM, "ns", "3,100"), (GEMV, "usecond", "18"), (ADD, "ns", "2,100")]
    path = _csv(tmp_path, [(GEMV, "ns", "1,000"), (ADD, "ns", "900")] + step * 2 + last)
    assert [nsk.short(n) for n in (NORM, GEMV, ADD)] == ["norm_kernel", "gemv_kernel",
                                                         "map_kernel"]
    assert nsk.step_period([n for n, _ in nsk.kernels(str(path))]) == 3
    assert nsk.main([str(path), "--step-us", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["     3.10 us  norm_kernel", "    18.00 us  gemv_kernel",
                       "     2.10 us  map_kernel"]
    assert out[3].startswith("3 kernels, 23.20 us alone; step p50 20.00 us, 3.20 us less than")
    assert nsk.main([str(path), "--step-us", "30"]) == 0
    assert "6.80 us of it outside the kernels' own times" in capsys.readouterr().out


def test_refusals(tmp_path, capsys):
    path = _csv(tmp_path, [(NORM, "ns", "1"), (GEMV, "ns", "2"), (ADD, "ns", "3")])
    assert nsk.main([str(path)]) == 2
    assert "no repeated step among 3 kernels" in capsys.readouterr().err
    path = _csv(tmp_path, [(NORM, "furlong", "1")])
    assert nsk.main([str(path)]) == 2
    assert "unknown unit 'furlong'" in capsys.readouterr().err
