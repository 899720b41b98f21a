"""The benchmark's database: a regional hospital network, built deterministically from a seed.

    build_db(Path("hospital.sqlite"), seed=0)      # nine related tables, ~10,000 rows

Nine tables with foreign keys — insurers, hospitals, departments (a specialty at a hospital),
doctors, patients, diagnoses, admissions (a patient's stay under a doctor, for a diagnosis),
medications and prescriptions (a medication given during an admission) — filled from seeded
pools of realistic names. Nothing here resembles the project's shop catalog on purpose: what a
model memorised about that catalog is no help.

The named entities questions can mention are listed in ``ENTITY_COLUMNS`` by kind; ``partition``
assigns every value of every kind to one split, so test questions mention only entities that no
training question does (``questions.py`` draws each split's bindings from its own share).
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta
from pathlib import Path

SPLITS = ("train", "dev", "test")
SHARES = {"train": 0.55, "dev": 0.15, "test": 0.30}
"""Share of each kind's entity values that only that split's questions may mention."""

FIRST_NAMES = (
    "Aino", "Albert", "Alma", "Anders", "Anika", "Antoine", "Astrid", "Beatriz", "Bruno", "Camille",
    "Carlos", "Chiara", "Clara", "Dario", "Elif", "Elena", "Emil", "Erik", "Esther", "Fabian",
    "Farah", "Felix", "Freya", "Gabriel", "Greta", "Hana", "Hugo", "Ida", "Ilse", "Ines",
    "Ivan", "Jakob", "Jana", "Jonas", "Josefine", "Julien", "Karin", "Kasper", "Lars", "Laura",
    "Leon", "Lina", "Lotte", "Luca", "Lukas", "Magnus", "Maja", "Marek", "Marta", "Mateo",
    "Matilde", "Milan", "Mira", "Nadia", "Niels", "Nina", "Noah", "Nora", "Oskar", "Paula",
    "Pavel", "Petra", "Pietro", "Rafael", "Rania", "Rosa", "Ruben", "Sara", "Silvia", "Simon",
    "Sofia", "Stefan", "Tariq", "Teresa", "Theo", "Tomas", "Ugo", "Vera", "Viktor", "Yara",
    "Yusuf", "Zofia", "Agnes", "Basil", "Dora", "Edvin", "Frida", "Goran", "Helga", "Ivo")
LAST_NAMES = (
    "Andersen", "Bakker", "Barros", "Bauer", "Berg", "Bianchi", "Blom", "Brandt", "Costa", "Dahl",
    "Dvorak", "Eriksen", "Fischer", "Fontaine", "Gallo", "Garcia", "Hansen", "Havel", "Hofmann", "Horvat",
    "Jansen", "Jensen", "Kaya", "Keller", "Koch", "Kovac", "Kowalski", "Kraus", "Lang", "Larsen",
    "Laurent", "Lindqvist", "Lopes", "Lund", "Marino", "Martens", "Meyer", "Moreau", "Mueller", "Nagy",
    "Nielsen", "Novak", "Nowak", "Olsen", "Ortega", "Pedersen", "Peeters", "Petrov", "Pohl", "Popescu",
    "Quist", "Ramos", "Ricci", "Rossi", "Sandberg", "Santos", "Schmid", "Schulz", "Silva", "Simonsen",
    "Sorensen", "Strand", "Szabo", "Toth", "Vidal", "Vogel", "Wagner", "Weber", "Wolff", "Yilmaz",
    "Zeman", "Zielinski", "Aalto", "Bergman", "Castell", "Duarte", "Engel", "Falk", "Grieg", "Holm",
    "Ilic", "Jovanovic", "Kern", "Lehto", "Mattila", "Nyberg", "Oliveira", "Paredes", "Roth", "Salo")
CITIES = ("Aarhus", "Bergen", "Tampere", "Basel", "Salzburg", "Ljubljana", "Zagreb", "Krakow",
          "Seville", "Coimbra", "Antwerp", "Rotterdam", "Dresden", "Bologna", "Galway", "Tartu")
HOSPITALS = ("St. Brigid Hospital", "Riverside General", "Mercy Valley Hospital", "Harborview Medical Center",
             "Oakridge Clinic", "Bellmont University Hospital", "Fairhaven Hospital", "Greystone Infirmary",
             "Kingsbridge Medical Center", "Westmoor Hospital", "Ashford Memorial", "Larkfield Hospital")
SPECIALTIES = ("Cardiology", "Oncology", "Neurology", "Orthopedics", "Pediatrics", "Dermatology",
               "Gastroenterology", "Pulmonology", "Nephrology", "Endocrinology", "Urology", "Rheumatology",
               "Psychiatry", "Geriatrics")
# Diagnosis (name, ICD-10-like code, chronic?, the specialty that treats it).
DIAGNOSES = (
    ("Heart failure", "I50", 1, "Cardiology"), ("Atrial fibrillation", "I48", 1, "Cardiology"),
    ("Angina", "I20", 0, "Cardiology"), ("Lung cancer", "C34", 1, "Oncology"),
    ("Breast cancer", "C50", 1, "Oncology"), ("Stroke", "I63", 0, "Neurology"),
    ("Epilepsy", "G40", 1, "Neurology"), ("Migraine", "G43", 1, "Neurology"),
    ("Hip fracture", "S72", 0, "Orthopedics"), ("Osteoarthritis", "M17", 1, "Orthopedics"),
    ("Bronchiolitis", "J21", 0, "Pediatrics"), ("Dehydration", "E86", 0, "Pediatrics"),
    ("Cellulitis", "L03", 0, "Dermatology"), ("Psoriasis", "L40", 1, "Dermatology"),
    ("Pancreatitis", "K85", 0, "Gastroenterology"), ("Gastritis", "K29", 0, "Gastroenterology"),
    ("Pneumonia", "J18", 0, "Pulmonology"), ("COPD", "J44", 1, "Pulmonology"),
    ("Asthma", "J45", 1, "Pulmonology"), ("Kidney stones", "N20", 0, "Nephrology"),
    ("Chronic kidney disease", "N18", 1, "Nephrology"), ("Type 2 diabetes", "E11", 1, "Endocrinology"),
    ("Hypothyroidism", "E03", 1, "Endocrinology"), ("Urinary tract infection", "N39", 0, "Urology"),
    ("Prostate enlargement", "N40", 1, "Urology"), ("Rheumatoid arthritis", "M06", 1, "Rheumatology"),
    ("Gout", "M10", 1, "Rheumatology"), ("Major depression", "F32", 1, "Psychiatry"),
    ("Delirium", "F05", 0, "Geriatrics"), ("Dementia", "F03", 1, "Geriatrics"))
# Medication (generic name, class, typical unit price).
MEDICATIONS = (
    ("amoxicillin", "antibiotic", 0.4), ("azithromycin", "antibiotic", 1.9), ("ceftriaxone", "antibiotic", 6.5),
    ("doxycycline", "antibiotic", 0.8), ("atorvastatin", "statin", 0.3), ("simvastatin", "statin", 0.2),
    ("rosuvastatin", "statin", 0.9), ("metoprolol", "beta blocker", 0.25), ("bisoprolol", "beta blocker", 0.3),
    ("paracetamol", "analgesic", 0.05), ("ibuprofen", "analgesic", 0.08), ("tramadol", "analgesic", 0.6),
    ("morphine", "analgesic", 2.4), ("warfarin", "anticoagulant", 0.15), ("apixaban", "anticoagulant", 3.2),
    ("heparin", "anticoagulant", 4.8), ("metformin", "antidiabetic", 0.1), ("insulin glargine", "antidiabetic", 9.5),
    ("sitagliptin", "antidiabetic", 2.7), ("sertraline", "antidepressant", 0.35), ("fluoxetine", "antidepressant", 0.3),
    ("salbutamol", "bronchodilator", 1.2), ("tiotropium", "bronchodilator", 3.9), ("omeprazole", "antacid", 0.2),
    ("pantoprazole", "antacid", 0.35), ("prednisone", "corticosteroid", 0.15), ("dexamethasone", "corticosteroid", 0.9),
    ("methotrexate", "antirheumatic", 1.6), ("allopurinol", "antirheumatic", 0.2), ("levothyroxine", "hormone", 0.12))
INSURERS = (("Northwind Health", "private"), ("Bluecrest Mutual", "private"), ("Civitas Care", "public"),
            ("Evergreen Assurance", "private"), ("Helios Insurance", "private"), ("Meridian Health Fund", "public"),
            ("Solace Mutual", "private"), ("Tidewater Insurance", "private"), ("Unity Health Plan", "public"))
ADMISSION_KINDS = (("emergency", 0.45), ("elective", 0.40), ("transfer", 0.15))
GRADES = ("resident", "attending", "consultant")

ENTITY_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "city": (("patients", "city"), ("hospitals", "city")),
    "hospital": (("hospitals", "name"),),
    "specialty": (("departments", "specialty"),),
    "doctor": (("doctors", "name"),),
    "patient": (("patients", "name"),),
    "diagnosis": (("diagnoses", "name"),),
    "drug": (("medications", "name"),),
    "drug_class": (("medications", "drug_class"),),
    "insurer": (("insurers", "name"),),
}
"""The named entities a question may mention, by kind, and where their values live. Admission
kinds, doctor grades, sexes, years and numbers are vocabulary every split shares."""

SCHEMA = """
CREATE TABLE insurers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, plan_type TEXT NOT NULL);
CREATE TABLE hospitals (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,
    beds INTEGER NOT NULL, opened_year INTEGER NOT NULL);
CREATE TABLE departments (id INTEGER PRIMARY KEY, hospital_id INTEGER NOT NULL REFERENCES hospitals(id),
    specialty TEXT NOT NULL, floor INTEGER NOT NULL);
CREATE TABLE doctors (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
    department_id INTEGER NOT NULL REFERENCES departments(id), hired_on TEXT NOT NULL, grade TEXT NOT NULL);
CREATE TABLE patients (id INTEGER PRIMARY KEY, name TEXT NOT NULL, birth_date TEXT NOT NULL, sex TEXT NOT NULL,
    city TEXT NOT NULL, insurer_id INTEGER REFERENCES insurers(id));
CREATE TABLE diagnoses (id INTEGER PRIMARY KEY, code TEXT NOT NULL, name TEXT NOT NULL, chronic INTEGER NOT NULL);
CREATE TABLE admissions (id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(id),
    doctor_id INTEGER NOT NULL REFERENCES doctors(id), diagnosis_id INTEGER NOT NULL REFERENCES diagnoses(id),
    admitted_on TEXT NOT NULL, discharged_on TEXT, kind TEXT NOT NULL, cost REAL NOT NULL);
CREATE TABLE medications (id INTEGER PRIMARY KEY, name TEXT NOT NULL, drug_class TEXT NOT NULL,
    unit_price REAL NOT NULL);
CREATE TABLE prescriptions (id INTEGER PRIMARY KEY, admission_id INTEGER NOT NULL REFERENCES admissions(id),
    medication_id INTEGER NOT NULL REFERENCES medications(id), dose_mg REAL NOT NULL, days INTEGER NOT NULL);
"""
FIRST_DAY, LAST_DAY = date(2021, 1, 1), date(2024, 12, 31)
# What a day in each specialty costs, roughly (cost = base + per day × stay, with noise).
DAILY_COST = {"Cardiology": 1400, "Oncology": 1700, "Neurology": 1300, "Orthopedics": 1200, "Pediatrics": 900,
              "Dermatology": 700, "Gastroenterology": 1000, "Pulmonology": 1100, "Nephrology": 1150,
              "Endocrinology": 850, "Urology": 950, "Rheumatology": 800, "Psychiatry": 600, "Geriatrics": 750}


def _day(rng: random.Random, first: date, last: date) -> date:
    return first + timedelta(days=rng.randrange((last - first).days + 1))


def _people(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct full names (doctors and patients together: a name names one person)."""
    names = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]
    return rng.sample(names, n)


def build_db(path: Path, seed: int = 0, patients: int = 1400, admissions: int = 3600) -> Path:
    """Write the database to ``path`` (replacing it); the same seed gives the same rows."""
    rng = random.Random(seed)
    path.unlink(missing_ok=True)
    people = _people(rng, patients + 400)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO insurers VALUES (?, ?, ?)", [(i + 1, *ins) for i, ins in enumerate(INSURERS)])
        cities = rng.sample(CITIES, len(HOSPITALS))  # one hospital per city; four cities have none
        conn.executemany("INSERT INTO hospitals VALUES (?, ?, ?, ?, ?)", [
            (i + 1, name, cities[i], rng.randrange(80, 900, 10), rng.randint(1952, 2015))
            for i, name in enumerate(HOSPITALS)])
        departments, doctors = _staff(rng, people[patients:])
        conn.executemany("INSERT INTO departments VALUES (?, ?, ?, ?)", departments)
        conn.executemany("INSERT INTO doctors VALUES (?, ?, ?, ?, ?)", doctors)
        city_weights = [rng.uniform(0.5, 2.0) for _ in CITIES]
        conn.executemany("INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?)", [
            (i + 1, people[i], _day(rng, date(1935, 1, 1), date(2020, 12, 31)).isoformat(), rng.choice("FM"),
             rng.choices(CITIES, city_weights)[0], rng.randint(1, len(INSURERS)) if rng.random() > 0.03 else None)
            for i in range(patients)])
        conn.executemany("INSERT INTO diagnoses VALUES (?, ?, ?, ?)",
                         [(i + 1, code, name, chronic) for i, (name, code, chronic, _) in enumerate(DIAGNOSES)])
        conn.executemany("INSERT INTO medications VALUES (?, ?, ?, ?)", [
            (i + 1, name, cls, round(price * rng.uniform(0.85, 1.15), 2)) for i, (name, cls, price) in enumerate(MEDICATIONS)])
        stays, scripts = _admissions(rng, conn, patients, admissions)
        conn.executemany("INSERT INTO admissions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", stays)
        conn.executemany("INSERT INTO prescriptions VALUES (?, ?, ?, ?, ?)", scripts)
        conn.commit()
    finally:
        conn.close()
    return path


def _staff(rng: random.Random, names: list[str]) -> tuple[list[tuple], list[tuple]]:
    """Departments (6-9 specialties per hospital, every specialty somewhere) and 2-5 doctors each."""
    departments, doctors = [], []
    picks = [rng.sample(SPECIALTIES, rng.randint(6, 9)) for _ in HOSPITALS]
    for spec in SPECIALTIES:  # every specialty exists at some hospital
        if not any(spec in p for p in picks):
            rng.choice(picks).append(spec)
    for h, specs in enumerate(picks):
        for spec in specs:
            dept = len(departments) + 1
            departments.append((dept, h + 1, spec, rng.randint(1, 6)))
            for _ in range(rng.randint(2, 5)):
                hired = _day(rng, date(1995, 1, 1), date(2024, 6, 30)).isoformat()
                doctors.append((len(doctors) + 1, names[len(doctors)], dept, hired, rng.choice(GRADES)))
    return departments, doctors


def _admissions(rng: random.Random, conn: sqlite3.Connection, patients: int, n: int) -> tuple[list[tuple], list[tuple]]:
    """Stays whose doctor's specialty treats the diagnosis, mostly in the patient's own city, and the
    medications given during them (drawn mostly from the classes that diagnosis calls for)."""
    doctors = conn.execute("SELECT d.id, dp.specialty, h.city FROM doctors d JOIN departments dp ON "
                           "dp.id = d.department_id JOIN hospitals h ON h.id = dp.hospital_id").fetchall()
    city_of = dict(conn.execute("SELECT id, city FROM patients"))
    by_specialty: dict[str, list[tuple[int, str]]] = {}
    for doc, spec, city in doctors:
        by_specialty.setdefault(spec, []).append((doc, city))
    classes = sorted({cls for _, cls, _ in MEDICATIONS})
    favourite = {name: rng.sample(classes, 3) for name, *_ in DIAGNOSES}
    meds_of = {cls: [i + 1 for i, m in enumerate(MEDICATIONS) if m[1] == cls] for cls in classes}
    kinds, weights = zip(*ADMISSION_KINDS)
    stays, scripts = [], []
    for aid in range(1, n + 1):
        patient = rng.randint(1, patients)
        dx = rng.randrange(len(DIAGNOSES))
        name, _, _, spec = DIAGNOSES[dx]
        local = [d for d, city in by_specialty[spec] if city == city_of[patient]]
        doctor = rng.choice(local) if local and rng.random() < 0.7 else rng.choice(by_specialty[spec])[0]
        admitted = _day(rng, FIRST_DAY, LAST_DAY)
        stay = min(int(rng.expovariate(1 / 4.5)), 30)
        discharged = admitted + timedelta(days=stay)
        gone = None if discharged > LAST_DAY else discharged.isoformat()  # still in hospital at year end
        cost = round(DAILY_COST[spec] * (stay + 1) * rng.uniform(0.8, 1.25) + rng.uniform(150, 600), 2)
        stays.append((aid, patient, doctor, dx + 1, admitted.isoformat(), gone, rng.choices(kinds, weights)[0], cost))
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
            cls = rng.choice(favourite[name]) if rng.random() < 0.8 else rng.choice(classes)
            med = rng.choice(meds_of[cls])
            scripts.append((len(scripts) + 1, aid, med, float(rng.choice((5, 10, 20, 40, 50, 100, 250, 500))),
                            rng.randint(1, min(30, stay + 1))))
    return stays, scripts


def entity_values(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Every value of every entity kind in the database, sorted."""
    out: dict[str, list[str]] = {}
    for kind, columns in ENTITY_COLUMNS.items():
        values: set[str] = set()
        for table, column in columns:
            values |= {v for (v,) in conn.execute(f"SELECT DISTINCT {column} FROM {table}") if v is not None}
        out[kind] = sorted(values)
    return out


def partition(values: dict[str, list[str]], seed: int = 0,
              strata: dict[str, set[str]] | None = None) -> dict[str, dict[str, str]]:
    """kind → value → split: each kind's values shuffled and cut by ``SHARES`` (every split gets
    at least one). ``strata`` (kind → a subset) is cut separately, so e.g. the cities that have a
    hospital are spread over every split too."""
    rng = random.Random(f"partition-{seed}")
    out: dict[str, dict[str, str]] = {}
    for kind, vals in values.items():
        groups = [[v for v in vals if v in strata[kind]], [v for v in vals if v not in strata[kind]]] \
            if strata and kind in strata else [list(vals)]
        out[kind] = {}
        for group in groups:
            rng.shuffle(group)
            n_dev = max(1, round(SHARES["dev"] * len(group))) if len(group) >= 3 else 0
            n_test = max(1, round(SHARES["test"] * len(group))) if len(group) >= 3 else 0
            for i, v in enumerate(group):
                out[kind][v] = "test" if i < n_test else "dev" if i < n_test + n_dev else "train"
    return out


def hospital_cities(conn: sqlite3.Connection) -> set[str]:
    return {c for (c,) in conn.execute("SELECT city FROM hospitals")}


__all__ = ["ENTITY_COLUMNS", "SPLITS", "build_db", "entity_values", "hospital_cities", "partition"]
