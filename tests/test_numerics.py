"""The library numerics ddpsim stands on (scipy.stats, scipy.optimize, numpy) against reference
values on fixed, seeded inputs.

The reference values: Student's t from the 3-decimal table for 1..30 degrees of freedom and the
Cornish-Fisher expansion about the normal beyond (within 1e-3 of the exact quantile); the
paired interval and the rounds to decide from those t values; pool-adjacent-violators merging
adjacent blocks by their weighted means; alpha-beta from the weighted normal equations solved by
Cramer's rule, refitted through the origin for a negative intercept; and the quantile
``xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)`` at ``pos = (n - 1) q``. Where a reference is exact
up to rounding the library must agree to 1e-12 relative; the t values to the table's printed
digits and within 1e-3 beyond it.
"""

from __future__ import annotations

import math
import random

import pytest
import scipy.stats

from ddpsim.calibration.interference_fit import MAX_SLOWDOWN, XTOL, bisect_increasing
from ddpsim.formats import quantile
from ddpsim.network.curve_fit import CalibratedCurve, fit_alpha_beta, isotonic
from ddpsim.validation.compare import MAX_ROUNDS_TO_DECIDE, paired_gap_ci_pct, rounds_to_decide

INF = math.inf
REL = 1e-12

T_DFS = list(range(1, 201)) + [250, 500, 1000, 10_000, 1_000_000]
#: (seed, rounds, log gap, log scatter) of the paired runs
PAIRED_CASES = [(1, 3, 0.05, 0.02), (2, 5, 0.03, 0.01), (3, 10, 0.021, 0.02), (4, 30, 0.0, 0.05),
                (5, 2, 0.1, 0.1), (6, 40, 0.019, 0.003), (7, 8, -0.02, 0.01), (8, 6, 0.025, 0.02),
                (9, 12, 0.015, 0.01), (10, 4, 0.04, 0.03)]
QS = (0.0, 0.1, 0.5, 0.9, 1.0)


def paired(seed: int, n: int, gap: float, sd: float) -> tuple[list[float], list[float]]:
    """``(slow, fast)`` run means of ``n`` rounds: slow / fast lognormal around ``exp(gap)``."""
    rng = random.Random(seed)
    fast = [1.0 + 0.2 * rng.random() for _ in range(n)]
    return [f * math.exp(gap + rng.gauss(0.0, sd)) for f in fast], fast


def iso_cases() -> list[tuple[list[float], list[float]]]:
    rng = random.Random(11)
    out = []
    for n in (1, 2, 3, 5, 8, 13, 21):
        for _ in range(3):
            out.append(([rng.uniform(0.0, 10.0) for _ in range(n)], [rng.randint(1, 100) for _ in range(n)]))
    out.append(([1.0, 2.0, 2.0, 1.5, 1.5, 3.0, 0.5, 4.0], [1, 2, 3, 4, 5, 6, 7, 8]))  # ties
    out.append(([0.1 * k for k in range(10)], [rng.randint(1, 100) for _ in range(10)]))  # already sorted
    out.append(([10.0 - k for k in range(7)], [1, 1, 1, 1, 1, 1, 1]))  # decreasing: one block
    out.append(([3.3] * 5, [5, 4, 3, 2, 1]))
    out.append(([rng.gauss(1e-3, 3e-4) for _ in range(9)], [rng.uniform(0.5, 2.0) for _ in range(9)]))
    return out


def ab_cases() -> list[tuple[list[float], list[float]]]:
    rng = random.Random(12)
    sizes = [4096.0 * 4 ** k for k in range(9)]
    out = []
    for alpha, bw, noise in ((40e-6, 2.5e9, 0.05), (400e-6, 1e9, 0.1), (5e-6, 20e9, 0.02), (1e-3, 5e8, 0.0)):
        out.append((sizes, [(alpha + s / bw) * (1.0 + rng.uniform(-noise, noise)) for s in sizes]))
    # times rising faster than the sizes: a negative intercept, so alpha sits at its bound 0
    out.append(([1e3, 1e4, 1e5, 1e6], [1e-6, 3e-5, 2e-4, 2e-3]))
    out.append(([4096.0, 65536.0, 1048576.0], [1e-5, 4e-4, 8e-3]))
    out.append(([1000.0, 1000.0], [1.0, 2.0]))  # one size: no slope
    # the bundled CPU calibration's all-reduce (reports/cpu-gloo-calibration.json), its first two pooled
    out.append(([4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0, 268435456.0],
                [0.00041422, 0.00041422, 0.00046299319019926766, 0.0006973307168003885, 0.0012442858500035072,
                 0.003207583522500954, 0.012523981249978533, 0.049097211926869576, 0.18453489127271247]))
    return out


def quantile_cases() -> list[list[float]]:
    rng = random.Random(13)
    return [[rng.expovariate(1.0) for _ in range(n)] for n in (1, 2, 3, 4, 5, 7, 10, 20, 33)] + [[2.0, 2.0, 1.0, 1.0]]


# reference values (module docstring), printed with repr()
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
        2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
        2.0394259062414015, 2.0368538067913176, 2.0344428176122236, 2.0321782755832123, 2.030047243051229,
        2.028038261474072, 2.026141146071673, 2.0243468137416363, 2.0226471381215028, 2.0210348269323553,
        2.0195033177095842, 2.0180466887851103, 2.0166595829816862, 2.015337141951664, 2.0140749494680414,
        2.0128689822761, 2.0117155673557043, 2.0106113446399108, 2.0095532343944353, 2.0085384085923215,
        2.0075642657245854, 2.006628408575285, 2.0057286245619705, 2.0048628683026952, 2.0040292461209335,
        2.003226002241731, 2.0024515064676494, 2.001704243152734, 2.0009828013178064, 2.0002858657716245,
        1.9996122091205302, 1.9989606845645729, 1.9983302193912884, 1.9977198090895774, 1.9971285120158282,
        1.9965554445527824, 1.9959997767088542, 1.9954607281118624, 1.9949375643565506, 1.9944295936699803,
        1.9939361638629933, 1.993456659539521, 1.9929904995386531, 1.992537134587138, 1.9920960451423886,
        1.9916667394082033, 1.9912487515072879, 1.9908416397963045, 1.9904449853106558, 1.9900583903274953,
        1.989681477036613, 1.989313886309867, 1.9889552765607421, 1.9886053226864286, 1.9882637150855373,
        1.9879301587452212, 1.9876043723920445, 1.987286087701471, 1.9869750485613027, 1.9866710103848206,
        1.9863737394697616, 1.9860830123996014, 1.9857986154839211, 1.9855203442349165, 1.985248002877351,
        1.98498140388949, 1.9847203675727567, 1.9844647216480298, 1.9842143008766828, 1.9839689467046138,
        1.983728506927653, 1.983492835376866, 1.9832617916223891, 1.983035240694528, 1.982813052820969,
        1.982595103179017, 1.9823812716618714, 1.9821714426580226, 1.9819655048429143, 1.9817633509820856,
        1.98156487774506, 1.981369985529306, 1.981178578293635, 1.9809905634004554, 1.9808058514663356,
        1.9806243562203731, 1.9804459943698935, 1.9802706854730454, 1.980098351817878, 1.9799289183075242,
        1.9797623123511234, 1.9795984637601673, 1.9794373046499398, 1.9792787693457747, 1.9791227942938499,
        1.9789693179762695, 1.9788182808301933, 1.9786696251707887, 1.9785232951177991, 1.9783792365255306,
        1.9782373969160725, 1.9780977254155792, 1.9779601726934515, 1.9778246909042636, 1.9776912336322925,
        1.9775597558385154, 1.9774302138099482, 1.977302565111202, 1.9771767685381516, 1.9770527840736019,
        1.9769305728448594, 1.976810097083108, 1.9766913200845029, 1.976574206172902, 1.9764587206641457,
        1.9763448298318222, 1.9762325008744346, 1.976121701883915, 1.9760124018154122, 1.9759045704582996,
        1.9757981784083414, 1.9756931970409681, 1.9755895984856058, 1.9754873556010137, 1.9753864419515843,
        1.9752868317845609, 1.9751885000081304, 1.9750914221703582, 1.9749955744389194, 1.9749009335815975,
        1.9748074769475155, 1.9747151824490659, 1.9746240285445105, 1.9745339942212226, 1.97444505897954,
        1.9743572028172098, 1.9742704062143916, 1.9741846501192029, 1.9740999159337795, 1.9740161855008322,
        1.973933441090678, 1.9738516653887255, 1.9737708414833997, 1.9736909528544841, 1.973611983361866,
        1.9735339172346655, 1.9734567390607405, 1.973380433776542, 1.9733049866573158, 1.9732303833076308,
        1.9731566096522235, 1.9730836519271475, 1.9730114966712127, 1.9729401307177088, 1.9728695411863937,
        1.9727997154757482, 1.9727306412554755, 1.9726623064592446, 1.9725946992776642, 1.9725278081514797,
        1.9724616217649866, 1.9723961290396488, 1.9723313191279186, 1.9722671814072466, 1.9722037054742805,
        1.9721408811392382, 1.972078698420457, 1.9720171475391066, 1.9719562189140638, 1.9718959031569403,
        1.9694982294391001, 1.964719816995114, 1.9623390782689683, 1.96020123988807, 1.9599663568141068]
PAIRED = [((-1.4888978259595502, 11.81736481949745, 3), 6), ((1.3267128104008323, 4.016629543337846, 5), 13),
          ((-0.15209325677173724, 2.4616193532291097, 10), 21),
          ((-1.5324879783540384, 1.5101632028513228, 30), 19), ((-84.49266027412186, 569.5345780731, 2), None),
          ((1.8681053472904714, 2.090029092523946, 40), 1052),
          ((-2.4061063403760454, -1.0439196323967352, 8), 3),
          ((0.432620025190742, 3.5245453784951595, 6), 7595), ((0.38616294776264487, 1.56302719301519, 12), 6),
          ((-2.108265659587481, 7.684819946242666, 4), 83)]
ISO = [[4.523795535098186], [8.568630063847495], [4.656500700997733], [5.355672116490611, 5.355672116490611],
       [6.298827202168019, 7.929768725199526], [2.0139003770709705, 2.0139003770709705],
       [0.41880336369846005, 9.742772395678374, 9.742772395678374],
       [6.373921398456712, 6.373921398456712, 8.31701625349978],
       [1.464705026894825, 1.464705026894825, 1.464705026894825],
       [1.9952129703800563, 1.9952129703800563, 1.9952129703800563, 1.9952129703800563, 1.9952129703800563],
       [9.068633091340363, 9.068633091340363, 9.068633091340363, 9.068633091340363, 9.068633091340363],
       [1.2276954846704704, 1.2276954846704704, 1.2276954846704704, 1.809017581952598, 1.809017581952598],
       [4.6993611517723775, 4.6993611517723775, 4.6993611517723775, 4.6993611517723775, 4.6993611517723775,
        4.6993611517723775, 4.6993611517723775, 6.749091690016954],
       [1.3459646885386067, 5.363395535312216, 5.363395535312216, 5.363395535312216, 5.363395535312216,
        5.420844097847206, 5.420844097847206, 5.420844097847206],
       [2.8516529283535896, 2.8516529283535896, 2.8516529283535896, 7.630735281562199, 7.630735281562199,
        7.630735281562199, 7.630735281562199, 7.630735281562199],
       [3.4790288915623675, 3.4790288915623675, 3.4790288915623675, 3.4790288915623675, 3.4790288915623675,
        3.4790288915623675, 3.4790288915623675, 3.4790288915623675, 3.4790288915623675, 3.686752049006823,
        5.1729157561510295, 5.1729157561510295, 5.872712692895869],
       [5.977406269040775, 5.977406269040775, 5.977406269040775, 5.977406269040775, 5.977406269040775,
        5.977406269040775, 5.977406269040775, 5.977406269040775, 5.977406269040775, 5.977406269040775,
        5.977406269040775, 5.977406269040775, 5.977406269040775],
       [3.3210373080088957, 3.3210373080088957, 3.3210373080088957, 3.3210373080088957, 3.3210373080088957,
        3.3210373080088957, 3.3210373080088957, 3.3210373080088957, 3.3210373080088957, 3.3210373080088957,
        3.3210373080088957, 3.3210373080088957, 3.621451566994809],
       [4.647493248922659, 4.647493248922659, 4.647493248922659, 4.859905714969912, 4.859905714969912,
        5.129143007926995, 5.129143007926995, 5.129143007926995, 5.129143007926995, 5.460953590853206,
        7.132947702775282, 7.132947702775282, 7.132947702775282, 7.132947702775282, 7.132947702775282,
        7.132947702775282, 7.132947702775282, 7.132947702775282, 7.646716018083495, 7.646716018083495,
        7.646716018083495],
       [4.8324021781165944, 4.8324021781165944, 4.8324021781165944, 4.8324021781165944, 4.8324021781165944,
        4.8324021781165944, 4.8324021781165944, 4.8324021781165944, 4.8324021781165944, 4.8324021781165944,
        5.803802495549239, 5.803802495549239, 5.803802495549239, 5.803802495549239, 5.803802495549239,
        5.803802495549239, 5.803802495549239, 5.803802495549239, 5.803802495549239, 5.803802495549239,
        7.5377128948063845],
       [1.3455273580899119, 2.83862622886406, 2.83862622886406, 2.83862622886406, 2.83862622886406,
        5.8950520355260245, 5.8950520355260245, 5.8950520355260245, 5.8950520355260245, 6.71523211485133,
        6.71523211485133, 6.71523211485133, 6.71523211485133, 6.721472987187775, 6.982917971569514,
        6.982917971569514, 6.982917971569514, 6.982917971569514, 7.3341244536157815, 7.3341244536157815,
        7.3341244536157815],
       [1.0, 1.6666666666666667, 1.6666666666666667, 1.6666666666666667, 1.6666666666666667, 1.6666666666666667,
        1.6666666666666667, 4.0],
       [0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7000000000000001, 0.8, 0.9],
       [7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0], [3.3, 3.3, 3.3, 3.3, 3.3],
       [0.000853383253000841, 0.000853383253000841, 0.000853383253000841, 0.001021347543635968,
        0.001021347543635968, 0.001021347543635968, 0.001021347543635968, 0.001021347543635968,
        0.001021347543635968]]
AB = [(4.024257136731574e-05, 2528001658.2770343), (0.0004016798914976016, 1020495842.960511),
      (4.967725801593692e-06, 20034796132.417362), (0.0009999999999999998, 500000000.00000006),
      (0.0, 690476190.4761904), (0.0, 300627348.8372092), (1.0, INF),
      (0.00042258601784791127, 1404859521.3288078)]
Q = [[0.2997661135566718, 0.2997661135566718, 0.2997661135566718, 0.2997661135566718, 0.2997661135566718],
     [1.152272333230424, 1.152645300009902, 1.1541371671278138, 1.1556290342457256, 1.1560020010252037],
     [0.2054561176422501, 0.21678299283405275, 0.2620904936012633, 1.5665814253453143, 1.8927041582813269],
     [0.13950695106192748, 0.14540983366439322, 0.20714286878533109, 1.003574146332431, 1.3243477042603948],
     [0.24068084778783314, 0.2840367968967329, 0.5648952746181104, 1.3939540691391745, 1.818040882889966],
     [0.014537552978876949, 0.10100873519686214, 0.9375198532087664, 1.815678013515647, 2.0501525171721373],
     [0.2966662784112475, 0.5349070266823407, 1.3860126043177723, 2.0052712719335175, 2.982291344816067],
     [0.12483791982840933, 0.1894044129729074, 0.6005465908013867, 1.6119739681489587, 4.246180913815023],
     [0.044169822624947765, 0.1484503620208351, 0.8695850067131234, 2.143953898128699, 3.5509727764685466],
     [1.0, 1.0, 1.5, 2.0, 2.0]]


def t975(df: int) -> float:
    """The 97.5 % quantile of Student's t that paired_gap_ci_pct and rounds_to_decide take from scipy."""
    return float(scipy.stats.t.ppf(0.975, df))


def test_t975_matches_the_table_to_its_digits_and_the_expansion_within_1e_3():
    for df, ref in zip(T_DFS, T975):
        if df <= 30:
            assert round(t975(df), 3) == ref, df
        else:
            assert abs(t975(df) - ref) <= 1e-3, df


def test_t975_closed_forms():
    """df 1: tan(0.475 pi); df 2: (2p - 1) / sqrt(2 p (1 - p)) at p = 0.975; df -> inf: the normal's 1.959964."""
    assert t975(1) == pytest.approx(math.tan(0.475 * math.pi), rel=REL)
    assert t975(2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=REL)
    assert t975(10 ** 9) == pytest.approx(1.959963984540054, rel=1e-8)


def _log_interval(ci: tuple[float, float, int]) -> tuple[float, float]:
    """(centre, half-width) of a paired interval on the log scale."""
    lo, hi = math.log1p(ci[0] / 100.0), math.log1p(ci[1] / 100.0)
    return (lo + hi) / 2, (hi - lo) / 2


def test_paired_interval_and_rounds_to_decide():
    """The interval's centre (the mean log ratio) as the reference to 1e-12; its half-width
    scaled by the ratio of the t quantiles; the rounds to decide the same."""
    for case, (ref_ci, ref_rounds) in zip(PAIRED_CASES, PAIRED):
        slow, fast = paired(*case)
        ci = paired_gap_ci_pct(slow, fast)
        n = ci[2]
        assert n == ref_ci[2] == case[1]
        (c, h), (ref_c, ref_h) = _log_interval(ci), _log_interval(ref_ci)
        assert c == pytest.approx(ref_c, rel=REL, abs=1e-15)
        assert h / ref_h == pytest.approx(t975(n - 1) / T975[n - 2], rel=1e-9)
        assert rounds_to_decide(slow, fast) == ref_rounds, case


def test_rounds_to_decide_never_exceeds_its_maximum():
    """Two rounds whose scatter needs just over MAX_ROUNDS_TO_DECIDE rounds (the normal's bound
    says 9999, Student's t 10002): None, as the docstring says; a little less scatter: 9953."""
    margin, z = 0.01, 1.959963984540054
    mu = math.log1p(0.02) + margin

    def rounds(normal_rounds: float) -> int | None:
        u = margin * math.sqrt(normal_rounds) / z / math.sqrt(2.0)  # two log ratios mu -+ u: sd u sqrt 2
        return rounds_to_decide([math.exp(mu - u), math.exp(mu + u)], [1.0, 1.0])

    assert rounds(9999) is None
    assert rounds(9950) == 9953 <= MAX_ROUNDS_TO_DECIDE


def test_isotonic():
    for (values, weights), ref in zip(iso_cases(), ISO):
        out = isotonic(values, weights)
        assert isinstance(out, list) and out == pytest.approx(ref, rel=REL)
        assert all(a <= b for a, b in zip(out, out[1:]))
    assert isotonic([], []) == []


def test_fit_alpha_beta():
    for (sizes, times), ref in zip(ab_cases(), AB):
        assert fit_alpha_beta(sizes, times) == pytest.approx(ref, rel=REL), (sizes, times)


def test_fit_alpha_beta_with_one_size_gives_its_fastest_time():
    """Every size the same: no slope to fit, so the fastest time and no bandwidth term. (Solved
    by the normal equations, the determinant of this singular system rounds to 2**36 > 0 and
    alpha comes out 2**-11 s, above every measured time.)"""
    assert fit_alpha_beta([5e5, 5e5, 5e5], [3e-4, 2e-4, 4e-4]) == (2e-4, INF)


def test_quantile():
    for xs, ref in zip(quantile_cases(), Q):
        assert [quantile(xs, q) for q in QS] == pytest.approx(ref, rel=REL)
        assert all(type(quantile(xs, q)) is float for q in QS)


def test_segment_picks_the_interval_holding_the_size():
    sizes, times = (10, 20, 40, 80), (1.0, 2.0, 2.5, 4.5)
    curve = CalibratedCurve(sizes=sizes, times_s=times, alpha_s=0.5, bandwidth_bytes_per_s=40.0)
    assert curve.segment(5) == (1.0, 0.0)          # below the smallest: its time
    assert curve.time_s(10) == 1.0 and curve.time_s(15) == 1.5 and curve.time_s(20) == 2.0
    assert curve.time_s(30) == 2.25 and curve.time_s(40) == 2.5 and curve.time_s(60) == 3.5
    assert curve.time_s(160) == 8.5                # beyond the largest: the last segment extends
    flat = CalibratedCurve(sizes=(10, 20), times_s=(1.0, 1.0), alpha_s=0.5, bandwidth_bytes_per_s=40.0)
    assert flat.time_s(60) == 2.0                  # a flat last segment: the global bandwidth beyond


def test_bisect_increasing_halves_to_the_crossing():
    """sqrt(x) = 2 on [1, 16]: x = 4, met within XTOL (40 halvings of the bracket); a step
    function's crossing, and the clamps at either end."""
    x, clamped = bisect_increasing(math.sqrt, 2.0, 1.0, MAX_SLOWDOWN)
    assert not clamped and abs(x - 4.0) <= XTOL
    x, _ = bisect_increasing(lambda s: float(s >= 3.3), 0.5, 1.0, MAX_SLOWDOWN)
    assert abs(x - 3.3) <= XTOL
    assert bisect_increasing(math.sqrt, 0.5, 1.0, MAX_SLOWDOWN) == (1.0, True)
    assert bisect_increasing(math.sqrt, 5.0, 1.0, MAX_SLOWDOWN) == (MAX_SLOWDOWN, True)
